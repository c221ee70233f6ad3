import {
  isAlias,
  isMap,
  isNode,
  isScalar,
  isSeq,
  type Document,
  type LineCounter,
  type Node,
} from 'yaml';

/**
 * The YAML document's structure, checked in one pass before it becomes values (duplicate keys,
 * aliases, merge keys, alias bombs), and the places in it that a problem points at.
 */

/** Aliases may add at least this many values to the document (more for a larger file) before it is refused. */
export const MIN_ALIAS_EXPANSION = 100_000;

/** A structural problem: where (key path and offset in the text) and what. */
export interface StructureProblem {
  path: (string | number)[];
  offset: number | undefined;
  message: string;
}

/**
 * What the YAML library leaves to its quadratic or located-nowhere checks, in one pass in
 * document order: a key written twice in one map (the first at which line), an alias without an
 * anchor before it, an alias inside the node it names, a merge key (`<<`) whose value is not a map
 * (or a list of maps), and aliases that expand to more than `maxExpansion` values (an alias bomb,
 * refused before anything walks the expanded tree).
 */
export function checkStructure(
  doc: Document,
  lineCounter: LineCounter,
  maxExpansion: number,
): StructureProblem[] {
  const found: StructureProblem[] = [];
  /** The latest node that defined each anchor so far. */
  const anchors = new Map<string, Node>();
  /** Expanded size of anchored nodes whose content is complete. */
  const sizes = new Map<Node, number>();
  const path: (string | number)[] = [];
  let added = 0;
  let stopped = false;
  const lineOf = (node: Node) => (node.range ? lineCounter.linePos(node.range[0]).line : '?');
  const problem = (node: Node, message: string, where = path) =>
    found.push({ path: [...where], offset: node.range?.[0], message });

  /** Counts the values `node` stands for once aliases are expanded. */
  const walk = (node: unknown): number => {
    if (stopped) return 0;
    if (isAlias(node)) {
      const target = anchors.get(node.source);
      if (target === undefined) {
        problem(node, `unresolved alias *${node.source}: no anchor &${node.source} before it`);
        return 1;
      }
      const size = sizes.get(target);
      if (size === undefined) {
        problem(
          node,
          `alias *${node.source} is inside the node &${node.source} it names: it would never end`,
        );
        return 1;
      }
      added += size;
      if (added > maxExpansion) {
        problem(
          node,
          `aliases expand to more than ${maxExpansion} values (an alias bomb?); *${node.source} alone stands for ${size}`,
        );
        stopped = true;
      }
      return size;
    }
    if (!isNode(node)) return 0;
    // An anchor is defined before its content, so an alias inside it finds it without a size.
    if (node.anchor) anchors.set(node.anchor, node);
    let size = 1;
    if (isMap(node)) {
      const keys = new Map<string, Node>();
      for (const pair of node.items) {
        const key = pair.key;
        const isMerge = isScalar(key) && typeof key.value === 'symbol';
        const name = isScalar(key) && !isMerge ? String(key.value) : undefined;
        if (name !== undefined) {
          const first = keys.get(name);
          if (first !== undefined)
            problem(key as Node, `duplicate key "${name}" (first at line ${lineOf(first)})`, [
              ...path,
              name,
            ]);
          else keys.set(name, key as Node);
        }
        size += walk(key);
        path.push(isMerge ? '<<' : (name ?? '?'));
        size += walk(pair.value);
        if (isMerge && !stopped) checkMerge(pair.value);
        path.pop();
      }
    } else if (isSeq(node)) {
      for (let i = 0; i < node.items.length; i++) {
        path.push(i);
        size += walk(node.items[i]);
        path.pop();
      }
    }
    if (node.anchor) sizes.set(node, size);
    return size;
  };

  const isMapLike = (v: unknown) =>
    isMap(v) ||
    (isAlias(v) && (anchors.get(v.source) === undefined || isMap(anchors.get(v.source))));
  const checkMerge = (value: unknown) => {
    const resolved = isAlias(value) ? anchors.get(value.source) : value;
    const ok = isSeq(resolved)
      ? resolved.items.every(isMapLike)
      : resolved === undefined || isMapLike(value);
    if (!ok && isNode(value))
      problem(value, 'a merge key (<<) takes a map, an alias of one (*name), or a list of them');
  };

  walk(doc.contents);
  return found;
}

/** The node at `path` (a scalar, map or list), or undefined. */
export function nodeAt(doc: Document, path: (string | number)[]): Node | undefined {
  if (path.length === 0) return doc.contents ?? undefined;
  const node = doc.getIn(path, true);
  return isScalar(node) || isMap(node) || isSeq(node) ? node : undefined;
}

/** Offset of the key (not the value) at `path`, else of its parent. */
export function keyOffset(doc: Document, path: (string | number)[]): number | undefined {
  const parent = nodeAt(doc, path.slice(0, -1));
  if (!isMap(parent)) return parent?.range?.[0];
  const last = path[path.length - 1];
  for (const pair of parent.items) {
    if (isScalar(pair.key) && String(pair.key.value) === String(last)) return pair.key.range?.[0];
  }
  return parent.range?.[0];
}
