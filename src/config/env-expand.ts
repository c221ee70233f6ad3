/**
 * `${VAR}` references in the configuration's values, and hiding the values they took again in
 * problem messages (a variable may hold a secret).
 */

const ENV_REF = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g;

/** `${VAR}` and `${VAR:-default}` in string values; an unset variable without default is a problem. */
export function expandEnv(
  value: unknown,
  env: Record<string, string | undefined>,
  path: (string | number)[],
  problem: (path: (string | number)[], message: string) => void,
  substituted: Map<string, string>,
): unknown {
  if (typeof value === 'string') {
    if (!value.includes('${')) return value;
    return value.replace(ENV_REF, (whole, name: string, fallback: string | undefined) => {
      const v = env[name];
      if (v !== undefined) {
        // Remembered so that no problem message shows it (hideEnvValues).
        substituted.set(v, name);
        return v;
      }
      if (fallback !== undefined) return fallback;
      problem(path, `environment variable ${name} is not set (referenced as ${whole})`);
      return whole;
    });
  }
  if (Array.isArray(value))
    return value.map((v, i) => expandEnv(v, env, [...path, i], problem, substituted));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value))
      out[k] = expandEnv(v, env, [...path, k], problem, substituted);
    return out;
  }
  return value;
}

/**
 * A problem's message with every value taken from the environment shown as its `${NAME}` instead
 * because a variable may hold a secret, and messages go to logs, terminals and the health page.
 * Values of 1–2 characters are replaced only where quoted, so they do not garble the message.
 */
export function hideEnvValues(message: string, substituted: ReadonlyMap<string, string>): string {
  let out = message;
  // Longest first, so a value inside another one does not break the longer one's replacement.
  for (const [value, name] of [...substituted].sort((a, b) => b[0].length - a[0].length)) {
    if (value === '') continue;
    const needle = value.length >= 3 ? value : JSON.stringify(value);
    const shown = value.length >= 3 ? `\${${name}}` : `"\${${name}}"`;
    if (out.includes(needle)) out = out.split(needle).join(shown);
    // The same value as a JSON string (zod quotes values in some messages, escaping them).
    const escaped = JSON.stringify(value).slice(1, -1);
    if (escaped !== value && escaped.length >= 3 && out.includes(escaped))
      out = out.split(escaped).join(`\${${name}}`);
  }
  return out;
}
