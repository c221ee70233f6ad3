/**
 * A page's script from functions that run both here and in the browser (the health page's and
 * the station screen's renderers), inlined by their source (`Function.prototype.toString`), then
 * the page's own client code.
 *
 * The daemon's bundle keeps the names of functions (scripts/bundle.mjs, esbuild's `keepNames`),
 * which wraps a nested function in a call to its `__name` helper; the script defines that helper
 * as the identity, so that the same source runs in the browser.
 */
export function browserScript(
  functions: readonly ((...args: never[]) => unknown)[],
  client: string,
): string {
  return `"use strict";\nconst __name = (f) => f;\n${functions.map((f) => f.toString()).join('\n')}\n${client}`;
}
