import { describe, expect, it } from 'vitest';
import {
  batteryPackTemplate,
  labelFromIdentifier,
} from '@scan-gateway/contract/battery-pack-template';
import { typedPropertySchema } from '@scan-gateway/contract';

// The lists below are copied from upstream-contract.md §2.4 by hand, independently of the template
// module, so a typo or an omission on either side fails here.

const STRING = `batteryIdentifier, operatorIdentifierAndInformation, manufacturerIdentifierAndInformation, manufacturingPlace, batteryCategory, extinguishingAgent, meaningOfLabelsAndSymbols, carbonFootprintPerformanceClass, thirdPartyAssurancesOfRecognisedSchemes, supplyChainIndices, batteryChemistry, criticalRawMaterials, nameOfTheCathodeAnodeElectrolyteMaterials, hazardousSubstances, impactSubstancesEnvironmentHumanHealthSafety, cycleLifeReferenceTest, informationOnAccidents`;
const DATE_TIME = `manufacturingDate, dateOfPuttingTheBatteryIntoService, warrantyPeriodOfTheBattery`;
const LINK = `separateCollectionSymbol, symbolsForCadmiumAndLead, carbonFootprintLabel, euDeclarationOfConformity, resultsOfTestReportsProvingCompliance, webLinkToPublicCarbonFootprintStudy, generalBatteryAndManufacturerInformation, informationOfDueDiligenceReport, manualForDisassemblyAndDismantlingOfTheBatteryPack, partNumbersForComponents, informationOnSourcesOfSpareParts, safetyMeasures, informationOnTheRoleOfEndUsersInContributingToWastePrevention, informationOnTheRoleOfEndUsersInContributingToTheSeparateCollectionOfWasteBatteries, informationOnBatteryCollection`;
const NUMERIC = `expectedLifetimeNumberOfChargeDischargeCycles, numberOfFullChargingAndDischargingCycles, numberOfDeepDischargeEvents, numberOfOverchargeEvents`;
const UOM: Array<[string, string]> = [
  ['kg', 'batteryMass'],
  ['kgCO2e/kWh', 'batteryCarbonFootprintPerFunctionalUnit'],
  ['tCO2e', 'absoluteBatteryCarbonFootprint'],
  [
    '%',
    'contributionOfRawMaterialAcquisitionAndPreProcessingLifecycleStage, shareBcfMainProductProduction, contributionOfDistributionLifecycleStage, contributionOfEndOfLifeAndRecyclingLifecycleStage, preConsumerRecycledNickelShare, preConsumerRecycledCobaltShare, preConsumerRecycledLithiumShare, preConsumerRecycledLeadShare, postConsumerRecycledNickelShare, postConsumerRecycledCobaltShare, postConsumerRecycledLithiumShare, postConsumerRecycledLeadShare, renewableContentShare, capacityFade, soce, soc, powerFade, initialRoundTripEnergyEfficiency, energyRoundTripEfficiencyAt50OfCycleLife, remainingRoundTripEnergyEfficiency, energyRoundTripEfficiencyFade, evolutionOfSelfDischargingRates, cellAndModuleRecommended, capacityThresholdForExhaustion',
  ],
  ['Ah', 'ratedCapacity, remainingCapacity, capacityThroughput'],
  ['kWh', 'certifiedUsableBatteryEnergy, ubeMeasured, energyThroughput'],
  ['V', 'minimumVoltage, maximumVoltage, nominalVoltage'],
  ['W', 'originalPowerCapability, remainingPowerCapability, maximumPermittedBatteryPower'],
  ['W/Wh', 'ratioBetweenNominalBatteryPowerAndBatteryEnergy'],
  ['%/month', 'initialSelfDischargeRate, selfDischargingRate'],
  ['Ohm', 'moduleRecommended'],
  ['years', 'expectedLifetimeInCalendarYears'],
  ['A/Ah', 'cRateOfRelevantCycleLifeTest'],
  [
    '°C',
    'temperatureInformation, temperatureRangeIdleStateLowerBoundary, temperatureRangeIdleStateUpperBoundary',
  ],
  [
    'Minutes',
    'timeSpentInExtremeTemperaturesAboveBoundary, timeSpentInExtremeTemperaturesBelowBoundary, timeSpentChargingDuringExtremeTemperaturesAboveBoundary, timeSpentChargingDuringExtremeTemperaturesBelowBoundary',
  ],
];

const list = (text: string) => text.split(',').map((s) => s.trim());

describe('BatteryPack template (contract §2.4)', () => {
  const template = batteryPackTemplate();

  it('has every string property with value "?"', () => {
    for (const id of list(STRING))
      expect(template[id], id).toMatchObject({ type: 'string', value: '?' });
  });

  it('has every dateTime property at 1970-01-01T00:00:00', () => {
    for (const id of list(DATE_TIME))
      expect(template[id], id).toMatchObject({ type: 'dateTime', dateTime: '1970-01-01T00:00:00' });
  });

  it('has every link property with url "?"', () => {
    for (const id of list(LINK)) expect(template[id], id).toMatchObject({ type: 'link', url: '?' });
  });

  it('has every numeric property at -1', () => {
    for (const id of list(NUMERIC))
      expect(template[id], id).toMatchObject({ type: 'numeric', value: -1 });
  });

  it('has every uom property at -1 with its unit', () => {
    for (const [uom, ids] of UOM) {
      for (const id of list(ids))
        expect(template[id], id).toEqual({ type: 'uom', name: expect.any(String), value: -1, uom });
    }
  });

  it('has batteryStatus as oneOf with the four allowed values and an empty value', () => {
    expect(template.batteryStatus).toEqual({
      type: 'oneOf',
      name: 'Battery status',
      value: '',
      oneOf: ['Original', 'Re-Used', 'Re-Manufacture', 'Waste'],
    });
  });

  it('has nothing else, and every property is a valid typed property with a label', () => {
    const expected = [STRING, DATE_TIME, LINK, NUMERIC, ...UOM.map(([, ids]) => ids)]
      .flatMap(list)
      .concat('batteryStatus');
    expect(Object.keys(template).sort()).toEqual([...expected].sort());
    expect(new Set(expected).size).toBe(expected.length);
    for (const [id, property] of Object.entries(template)) {
      expect(typedPropertySchema.safeParse(property).success, id).toBe(true);
      expect(property.name, id).toBe(labelFromIdentifier(id));
    }
  });

  it('derives readable labels', () => {
    expect(labelFromIdentifier('batteryMass')).toBe('Battery mass');
    expect(labelFromIdentifier('euDeclarationOfConformity')).toBe('EU declaration of conformity');
    expect(labelFromIdentifier('energyRoundTripEfficiencyAt50OfCycleLife')).toBe(
      'Energy round trip efficiency at 50 of cycle life',
    );
    expect(labelFromIdentifier('cRateOfRelevantCycleLifeTest')).toBe(
      'C-rate of relevant cycle life test',
    );
    expect(labelFromIdentifier('soce')).toBe('SOCE');
    expect(labelFromIdentifier('shareBcfMainProductProduction')).toBe(
      'Share BCF main product production',
    );
  });

  it('hands out a fresh copy each time', () => {
    const a = batteryPackTemplate();
    (a.batteryMass as { value: number }).value = 12;
    expect(batteryPackTemplate().batteryMass).toMatchObject({ value: -1 });
  });
});
