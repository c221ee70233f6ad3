import type { TypedProperty } from './contract.js';

/**
 * The property template of a `BatteryPack` product (contract §2.4): every property identifier with
 * its type, a readable label, the unit of `uom` properties and the template defaults the service
 * fills in on create (string `?`, link `?`, uom/numeric -1, dateTime 1970-01-01T00:00:00, oneOf "").
 */

/** Properties of type string (§2.4). */
export const STRING_PROPERTIES = [
  'batteryIdentifier',
  'operatorIdentifierAndInformation',
  'manufacturerIdentifierAndInformation',
  'manufacturingPlace',
  'batteryCategory',
  'extinguishingAgent',
  'meaningOfLabelsAndSymbols',
  'carbonFootprintPerformanceClass',
  'thirdPartyAssurancesOfRecognisedSchemes',
  'supplyChainIndices',
  'batteryChemistry',
  'criticalRawMaterials',
  'nameOfTheCathodeAnodeElectrolyteMaterials',
  'hazardousSubstances',
  'impactSubstancesEnvironmentHumanHealthSafety',
  'cycleLifeReferenceTest',
  'informationOnAccidents',
] as const;

/** Properties of type dateTime (§2.4). */
export const DATE_TIME_PROPERTIES = [
  'manufacturingDate',
  'dateOfPuttingTheBatteryIntoService',
  'warrantyPeriodOfTheBattery',
] as const;

/** The one oneOf property and its allowed values (§2.4). */
export const BATTERY_STATUS_VALUES = ['Original', 'Re-Used', 'Re-Manufacture', 'Waste'] as const;

/** Properties of type link (§2.4). */
export const LINK_PROPERTIES = [
  'separateCollectionSymbol',
  'symbolsForCadmiumAndLead',
  'carbonFootprintLabel',
  'euDeclarationOfConformity',
  'resultsOfTestReportsProvingCompliance',
  'webLinkToPublicCarbonFootprintStudy',
  'generalBatteryAndManufacturerInformation',
  'informationOfDueDiligenceReport',
  'manualForDisassemblyAndDismantlingOfTheBatteryPack',
  'partNumbersForComponents',
  'informationOnSourcesOfSpareParts',
  'safetyMeasures',
  'informationOnTheRoleOfEndUsersInContributingToWastePrevention',
  'informationOnTheRoleOfEndUsersInContributingToTheSeparateCollectionOfWasteBatteries',
  'informationOnBatteryCollection',
] as const;

/** Properties of type numeric (§2.4). */
export const NUMERIC_PROPERTIES = [
  'expectedLifetimeNumberOfChargeDischargeCycles',
  'numberOfFullChargingAndDischargingCycles',
  'numberOfDeepDischargeEvents',
  'numberOfOverchargeEvents',
] as const;

/** Properties of type uom, grouped by unit (§2.4). */
export const UOM_PROPERTIES: Readonly<Record<string, readonly string[]>> = {
  kg: ['batteryMass'],
  'kgCO2e/kWh': ['batteryCarbonFootprintPerFunctionalUnit'],
  tCO2e: ['absoluteBatteryCarbonFootprint'],
  '%': [
    'contributionOfRawMaterialAcquisitionAndPreProcessingLifecycleStage',
    'shareBcfMainProductProduction',
    'contributionOfDistributionLifecycleStage',
    'contributionOfEndOfLifeAndRecyclingLifecycleStage',
    'preConsumerRecycledNickelShare',
    'preConsumerRecycledCobaltShare',
    'preConsumerRecycledLithiumShare',
    'preConsumerRecycledLeadShare',
    'postConsumerRecycledNickelShare',
    'postConsumerRecycledCobaltShare',
    'postConsumerRecycledLithiumShare',
    'postConsumerRecycledLeadShare',
    'renewableContentShare',
    'capacityFade',
    'soce',
    'soc',
    'powerFade',
    'initialRoundTripEnergyEfficiency',
    'energyRoundTripEfficiencyAt50OfCycleLife',
    'remainingRoundTripEnergyEfficiency',
    'energyRoundTripEfficiencyFade',
    'evolutionOfSelfDischargingRates',
    'cellAndModuleRecommended',
    'capacityThresholdForExhaustion',
  ],
  Ah: ['ratedCapacity', 'remainingCapacity', 'capacityThroughput'],
  kWh: ['certifiedUsableBatteryEnergy', 'ubeMeasured', 'energyThroughput'],
  V: ['minimumVoltage', 'maximumVoltage', 'nominalVoltage'],
  W: ['originalPowerCapability', 'remainingPowerCapability', 'maximumPermittedBatteryPower'],
  'W/Wh': ['ratioBetweenNominalBatteryPowerAndBatteryEnergy'],
  '%/month': ['initialSelfDischargeRate', 'selfDischargingRate'],
  Ohm: ['moduleRecommended'],
  years: ['expectedLifetimeInCalendarYears'],
  'A/Ah': ['cRateOfRelevantCycleLifeTest'],
  '°C': [
    'temperatureInformation',
    'temperatureRangeIdleStateLowerBoundary',
    'temperatureRangeIdleStateUpperBoundary',
  ],
  Minutes: [
    'timeSpentInExtremeTemperaturesAboveBoundary',
    'timeSpentInExtremeTemperaturesBelowBoundary',
    'timeSpentChargingDuringExtremeTemperaturesAboveBoundary',
    'timeSpentChargingDuringExtremeTemperaturesBelowBoundary',
  ],
};

/** Template default of a dateTime property (§2.4). */
export const DEFAULT_DATE_TIME = '1970-01-01T00:00:00';

// Words that a plain camelCase split would spell wrongly.
const LABEL_WORDS: Readonly<Record<string, string>> = {
  eu: 'EU',
  bcf: 'BCF',
  ube: 'UBE',
  soc: 'SOC',
  soce: 'SOCE',
  c: 'C-',
};

/**
 * A readable label from a property identifier: `batteryMass` → `Battery mass`,
 * `euDeclarationOfConformity` → `EU declaration of conformity`, `soce` → `SOCE`.
 */
export function labelFromIdentifier(identifier: string): string {
  const words = identifier.match(/[A-Z]?[a-z]+|\d+|[A-Z]+(?![a-z])/g) ?? [identifier];
  const rendered = words.map((word, i) => {
    const lower = word.toLowerCase();
    const special = LABEL_WORDS[lower];
    if (special !== undefined) return special;
    return i === 0 ? lower.charAt(0).toUpperCase() + lower.slice(1) : lower;
  });
  return rendered.join(' ').replace('C- ', 'C-');
}

/**
 * A fresh copy of the whole BatteryPack template with its defaults, keyed by property identifier,
 * in the order of §2.4. Callers may mutate the result.
 */
export function batteryPackTemplate(): Record<string, TypedProperty> {
  const properties: Record<string, TypedProperty> = {};
  for (const id of STRING_PROPERTIES)
    properties[id] = { type: 'string', name: labelFromIdentifier(id), value: '?' };
  for (const id of DATE_TIME_PROPERTIES) {
    properties[id] = {
      type: 'dateTime',
      name: labelFromIdentifier(id),
      dateTime: DEFAULT_DATE_TIME,
    };
  }
  properties.batteryStatus = {
    type: 'oneOf',
    name: 'Battery status',
    value: '',
    oneOf: [...BATTERY_STATUS_VALUES],
  };
  for (const id of LINK_PROPERTIES)
    properties[id] = { type: 'link', name: labelFromIdentifier(id), url: '?' };
  for (const id of NUMERIC_PROPERTIES)
    properties[id] = { type: 'numeric', name: labelFromIdentifier(id), value: -1 };
  for (const [uom, ids] of Object.entries(UOM_PROPERTIES)) {
    for (const id of ids)
      properties[id] = { type: 'uom', name: labelFromIdentifier(id), value: -1, uom };
  }
  return properties;
}
