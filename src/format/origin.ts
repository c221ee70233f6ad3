/**
 * Where a read came from, in words, from the origin an input stored with it (JSON of a few
 * fields: `file` and `line`, `topic`, `port`, `peer`, `http`, `index`, `movedTo`…):
 * `file export.csv, line 12` rather than `{"file":"export.csv","line":12}`. Fields it does not
 * know are named as they are (`key value`); the file's hash is left out (the page and `trace`
 * show the file by name). Text that is not JSON is given back as it is.
 */
export function originWords(origin: string | Record<string, unknown> | null | undefined): string {
  if (origin === null || origin === undefined || origin === '') return '';
  let o: unknown = origin;
  if (typeof origin === 'string') {
    try {
      o = JSON.parse(origin);
    } catch {
      return origin;
    }
  }
  if (o === null || typeof o !== 'object' || Array.isArray(o)) return String(origin);
  const f = o as Record<string, unknown>;
  const words: string[] = [];
  const used = new Set<string>(['sha256']);
  const take = (key: string, say: (v: string) => string) => {
    const v = f[key];
    if (v === undefined || v === null || v === '') return;
    used.add(key);
    words.push(say(String(v)));
  };
  take('port', (v) => `serial port ${v}`);
  take('peer', (v) => (f['http'] !== undefined ? `from ${v}` : `TCP peer ${v}`));
  take('http', (v) => `HTTP ${v}`);
  take('topic', (v) => `MQTT topic ${v}`);
  take('file', (v) => `file ${v}`);
  take('line', (v) => `line ${v}`);
  take('index', (v) => `item ${Number(v) + 1} of the message`);
  take('format', (v) => (v === 'scan' ? 'a ready Scan' : `format ${v}`));
  take('movedTo', (v) => `moved to ${v}`);
  take('from', (v) => `from ${v}`);
  take('to', (v) => `to ${v}`);
  for (const [k, v] of Object.entries(f))
    if (!used.has(k) && v !== undefined && v !== null) words.push(`${k} ${String(v)}`);
  return words.join(', ');
}
