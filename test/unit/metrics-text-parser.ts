/**
 * A strict parser of the Prometheus text format for the metrics tests (no parser package is
 * installed, and the point is to be stricter than prom-client's own output needs).
 */

/** One parsed sample of the Prometheus text format. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** A metric family: its TYPE, HELP and samples. */
export interface Family {
  type: string;
  help?: string;
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

/**
 * A strict parser of the Prometheus text exposition format 0.0.4: every line is a HELP, a TYPE,
 * a comment or a sample; names and label names are checked; label values allow only the escapes
 * \\ \" \n; values are Go floats (NaN, ±Inf in any case); TYPE comes before its samples and once; a series
 * appears once; histograms have ascending `le`, cumulative counts and `+Inf` equal to `_count`.
 * Throws with the line number on the first violation.
 */
export function parsePrometheusText(text: string): Map<string, Family> {
  if (!text.endsWith('\n')) throw new Error('the exposition must end with a newline');
  const families = new Map<string, Family>();
  const seen = new Set<string>();
  const lines = text.slice(0, -1).split('\n');
  const familyOf = (sample: string): Family | undefined => {
    const direct = families.get(sample);
    if (direct) return direct;
    for (const suffix of ['_bucket', '_sum', '_count']) {
      if (!sample.endsWith(suffix)) continue;
      const f = families.get(sample.slice(0, -suffix.length));
      if (f && (f.type === 'histogram' || f.type === 'summary')) return f;
    }
    return undefined;
  };
  lines.forEach((line, index) => {
    const where = `line ${index + 1}: ${line}`;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!m) return; // a plain comment
      const [, kind, name, rest] = m as unknown as [string, string, string, string];
      if (!NAME.test(name)) throw new Error(`bad metric name: ${where}`);
      const family = families.get(name) ?? { type: 'untyped', samples: [] };
      if (kind === 'TYPE') {
        if (!TYPES.has(rest)) throw new Error(`unknown type: ${where}`);
        if (
          families.get(name)?.samples.length ||
          (families.has(name) && families.get(name)!.type !== 'untyped')
        )
          throw new Error(`TYPE after samples or twice: ${where}`);
        family.type = rest;
      } else {
        if (family.help !== undefined) throw new Error(`HELP twice: ${where}`);
        if (/\\[^\\n]/.test(rest.replace(/\\\\/g, '')))
          throw new Error(`bad escape in HELP: ${where}`);
        family.help = rest;
      }
      families.set(name, family);
      return;
    }
    if (line === '') return; // "empty lines are ignored" (exposition format)
    if (line.trim() === '') throw new Error(`whitespace-only line: ${where}`);
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)( -?\d+)?$/.exec(line);
    if (!m) throw new Error(`not a sample: ${where}`);
    const [, name, , labelText, valueText] = m as unknown as [
      string,
      string,
      string | undefined,
      string | undefined,
      string,
    ];
    const labels: Record<string, string> = {};
    if (labelText) {
      let rest = labelText;
      while (rest.length > 0) {
        const lm = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/.exec(rest);
        if (!lm || !LABEL.test(lm[1]!)) throw new Error(`bad label at "${rest}": ${where}`);
        if (lm[1]! in labels) throw new Error(`label twice: ${where}`);
        labels[lm[1]!] = lm[2]!.replace(/\\(["\\n])/g, (_, c: string) => (c === 'n' ? '\n' : c));
        rest = rest.slice(lm[0].length);
      }
    }
    // Go's strconv.ParseFloat, which Prometheus uses: NaN and Inf in any case (prom-client writes "Nan").
    const special = /^([+-]?)(inf|infinity|nan)$/i.exec(valueText);
    if (!special && !/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(valueText))
      throw new Error(`bad value: ${where}`);
    const value = special
      ? special[2]!.toLowerCase() === 'nan'
        ? NaN
        : special[1] === '-'
          ? -Infinity
          : Infinity
      : Number(valueText);
    const family = familyOf(name);
    if (!family) throw new Error(`sample without a TYPE: ${where}`);
    const key = `${name}{${Object.entries(labels)
      .sort()
      .map(([k, v]) => `${k}=${v}`)
      .join(',')}}`;
    if (seen.has(key)) throw new Error(`series twice: ${where}`);
    seen.add(key);
    family.samples.push({ name, labels, value });
  });
  for (const [name, f] of families) {
    if (f.type !== 'histogram') continue;
    const series = new Map<string, Sample[]>();
    for (const s of f.samples.filter((x) => x.name === `${name}_bucket`)) {
      const { le, ...rest } = s.labels;
      if (le === undefined) throw new Error(`${name}_bucket without le`);
      const k = JSON.stringify(rest);
      series.set(k, [...(series.get(k) ?? []), s]);
    }
    for (const [k, buckets] of series) {
      const les = buckets.map((b) => (b.labels.le === '+Inf' ? Infinity : Number(b.labels.le)));
      for (let i = 1; i < buckets.length; i++) {
        if (!(les[i]! > les[i - 1]!)) throw new Error(`${name} ${k}: le not ascending`);
        if (buckets[i]!.value < buckets[i - 1]!.value)
          throw new Error(`${name} ${k}: buckets not cumulative`);
      }
      if (les[les.length - 1] !== Infinity) throw new Error(`${name} ${k}: no +Inf bucket`);
      const count = f.samples.find(
        (x) => x.name === `${name}_count` && JSON.stringify(x.labels) === k,
      );
      if (!count || count.value !== buckets[buckets.length - 1]!.value)
        throw new Error(`${name} ${k}: _count differs from the +Inf bucket`);
    }
  }
  return families;
}
