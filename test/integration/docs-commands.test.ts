import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '../..');
const MAIN = join(ROOT, 'dist/src/main.js');
const DOCS = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md'))].map(
  (f) => (f === 'README.md' ? f : `docs/${f}`),
);

/** One command line a document shows: where, the words after the program, as written. */
interface DocCommand {
  where: string;
  words: string[];
  /** Inline code without the program's name (`replay --dry-run`): a command only if the CLI has it. */
  bare?: true;
}

/**
 * The shell words of `text`, quotes kept together and removed; `\|` (a pipe in a Markdown table)
 * and `|` inside brackets are a synopsis's alternatives, not pipes.
 */
function words(text: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quote: string | null = null;
  let depth = 0;
  let started = false;
  const t = text.replace(/\\\|/g, ' ');
  for (let i = 0; i < t.length; i++) {
    const c = t[i]!;
    if (quote) {
      if (c === quote) quote = null;
      else cur += c;
      continue;
    }
    if (c === '$' && t[i + 1] === '(') {
      // A command substitution is part of its word: `buffer-$(date +%F).db`.
      let open = 0;
      for (; i < t.length; i++) {
        cur += t[i];
        if (t[i] === '(') open++;
        else if (t[i] === ')' && --open === 0) break;
      }
      started = true;
    } else if (c === "'" || c === '"') {
      quote = c;
      started = true;
    } else if (c === '#' && !started && cur === '') {
      break; // a comment to the end of the line
    } else if (/\s/.test(c)) {
      if (started) out.push(cur);
      cur = '';
      started = false;
    } else if ((c === ';' || c === '&' || c === '(' || c === ')') && depth === 0) {
      if (started) out.push(cur);
      out.push(c);
      cur = '';
      started = false;
    } else if (c === '|' && depth === 0) {
      if (started) out.push(cur);
      out.push('|');
      cur = '';
      started = false;
    } else {
      if (c === '[') depth++;
      if (c === ']') depth = Math.max(0, depth - 1);
      cur += c;
      started = true;
    }
  }
  if (started) out.push(cur);
  return out;
}

/** Separators between shell commands; a command starts after each. */
const SEPARATORS = new Set([';', '&', '|', '(', ')']);

/**
 * The invocations of the CLI in one line of shell or inline code: `scan-gateway …` or
 * `node dist/src/main.js …` at the start of a command (after `sudo -u USER`, `env VAR=…`, `exec`
 * or a `$ ` prompt), never the user or unit of that name (`journalctl -u scan-gateway`).
 */
function invocations(line: string, where: string): DocCommand[] {
  const w = words(line);
  const found: DocCommand[] = [];
  let atStart = true;
  for (let i = 0; i < w.length; i++) {
    const word = w[i]!;
    if (SEPARATORS.has(word)) {
      atStart = true;
      continue;
    }
    if (!atStart) continue;
    if (word === 'sudo' || word === 'exec' || word === 'env' || /^[A-Z_]+=/.test(word)) continue;
    if (w[i - 1] === 'sudo' && word === '-u') {
      i++; // sudo's user
      continue;
    }
    let from = -1;
    if (word === 'scan-gateway' || word === '/usr/bin/scan-gateway') from = i + 1;
    else if (word === 'node' && /(^|\/)dist\/src\/main\.js$/.test(w[i + 1] ?? '')) from = i + 2;
    atStart = false;
    if (from < 0) continue;
    let end = from;
    while (end < w.length && !SEPARATORS.has(w[end]!)) end++;
    found.push({ where, words: w.slice(from, end) });
    i = end - 1;
  }
  return found;
}

/** Every invocation of the CLI in the fenced code blocks and the inline code of `file`. */
function docCommands(file: string): DocCommand[] {
  const out: DocCommand[] = [];
  let fenced = false;
  const lines = readFileSync(join(ROOT, file), 'utf8').split('\n');
  for (const [i, raw] of lines.entries()) {
    const where = `${file}:${i + 1}`;
    if (/^\s*(```|~~~)/.test(raw)) {
      fenced = !fenced;
      continue;
    }
    if (fenced) {
      // A continued line (`\` at its end) is one command with the next.
      let line = raw.replace(/^\s*\$ /, '');
      for (let j = i; line.endsWith('\\') && j + 1 < lines.length; j++)
        line = `${line.slice(0, -1)} ${lines[j + 1]!.trim()}`;
      out.push(...invocations(line, where));
      continue;
    }
    for (const m of raw.matchAll(/(`+)(.+?)\1/g)) {
      const code = m[2]!.replace(/^\$ /, '');
      const found = invocations(code, where);
      out.push(...found);
      // A command named without the program, with options: `products create --key K`.
      if (found.length === 0 && /^[a-z][a-z-]* (?:[a-z][a-z-]* )?\[?--?[a-z]/.test(code))
        out.push({ where, words: words(code), bare: true });
    }
  }
  return out;
}

/** What `<path> --help` of the built CLI lists: its subcommands and its options. */
interface Help {
  commands: Set<string>;
  options: Set<string>;
}

const helps = new Map<string, Promise<Help | null>>();

/** The help of a command path, or null when the CLI does not know the command. */
function helpOf(path: string[]): Promise<Help | null> {
  const key = path.join(' ');
  let help = helps.get(key);
  if (help === undefined) {
    help = run(process.execPath, [MAIN, ...path, '--help'], { cwd: ROOT, timeout: 30_000 }).then(
      ({ stdout }) => {
        if (!stdout.startsWith(`Usage: scan-gateway${key ? ` ${key}` : ''} `)) return null;
        const section = (name: string) => {
          const start = stdout.indexOf(`\n${name}:\n`);
          if (start < 0) return [];
          const rest = stdout.slice(start + name.length + 3);
          return rest.slice(0, rest.search(/\n\S|$/)).split('\n');
        };
        const commands = new Set(
          section('Commands').flatMap((l) => /^ {2}([a-z][\w-]*)/.exec(l)?.[1] ?? []),
        );
        const options = new Set(
          section('Options').flatMap((l) => {
            const m = /^ {2}(?:(-\w), )?(--[\w-]+)/.exec(l);
            return m ? [m[1], m[2]].filter((o): o is string => o !== undefined) : [];
          }),
        );
        return { commands, options };
      },
      () => null,
    );
    helps.set(key, help);
  }
  return help;
}

/**
 * What is wrong with one documented command line: a command word the CLI does not have, or an
 * option its command's help does not list. Words after the command path are its arguments and
 * placeholders (`<reference>`, `FILE`, `N`); only the `-x`/`--option` words are checked.
 */
async function problems(cmd: DocCommand): Promise<string[]> {
  const path: string[] = [];
  let help = await helpOf(path);
  if (help === null) return [`${cmd.where}: scan-gateway --help fails`];
  if (cmd.bare && !help.commands.has(cmd.words[0]!)) return [];
  let i = 0;
  for (; i < cmd.words.length; i++) {
    const word = cmd.words[i]!;
    if (!/^[a-z][a-z0-9-]*$/.test(word) || help.commands.size === 0) break;
    if (!help.commands.has(word))
      return [`${cmd.where}: scan-gateway ${[...path, word].join(' ')}: no such command`];
    path.push(word);
    help = await helpOf(path);
    if (help === null) return [`${cmd.where}: scan-gateway ${path.join(' ')} --help fails`];
  }
  const out: string[] = [];
  for (const word of cmd.words.slice(i)) {
    const m = /^\[*(--?[a-zA-Z][\w-]*)/.exec(word);
    if (!m) continue;
    const option = m[1]!;
    if (!help.options.has(option))
      out.push(
        `${cmd.where}: scan-gateway ${path.join(' ')}: ${option} is not an option of this command`,
      );
  }
  return out;
}

describe('the commands the documents show are the CLI’s', () => {
  const commands = DOCS.flatMap(docCommands);

  it('finds the documents’ command lines (README.md and docs/)', () => {
    // The extraction itself: commands at a line's start, after sudo -u, in tables and prose.
    expect(commands.length).toBeGreaterThan(60);
    const shown = commands.map((c) => `${c.where} ${c.words.join(' ')}`);
    expect(shown.some((s) => /^docs\/operations\.md:\d+ buffer backup /.test(s))).toBe(true);
    expect(shown.some((s) => /^README\.md:\d+ trace /.test(s))).toBe(true);
    expect(shown.some((s) => /^docs\/cli\.md:\d+ queue \[--config FILE/.test(s))).toBe(true);
    expect(shown.some((s) => /^docs\/cli\.md:\d+ products create --key/.test(s))).toBe(true);
    // The user and the unit of the same name are not commands.
    expect(shown.some((s) => /^\S+ (-u|-o|-g) /.test(s))).toBe(false);
  });

  it(
    'every command exists and every option it shows is in its --help',
    { timeout: 300_000 },
    async () => {
      const found: string[] = [];
      // Two at a time: each --help is a Node.js start, and the machine has two cores.
      for (let i = 0; i < commands.length; i += 2)
        for (const p of await Promise.all(commands.slice(i, i + 2).map(problems))) found.push(...p);
      expect(found).toEqual([]);
    },
  );

  it('every npm script the documents name is in package.json', () => {
    const scripts = (
      JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
        scripts: Record<string, string>;
      }
    ).scripts;
    const missing: string[] = [];
    for (const file of [...DOCS, 'CONTRIBUTING.md', 'CHANGELOG.md'])
      for (const [i, line] of readFileSync(join(ROOT, file), 'utf8').split('\n').entries())
        for (const m of line.matchAll(/\bnpm run (?:--silent )?([a-z][\w:-]*)/g))
          if (!(m[1]! in scripts)) missing.push(`${file}:${i + 1}: npm run ${m[1]!}`);
    expect(missing).toEqual([]);
  });

  it('the check fails on an unknown option and an unknown command', async () => {
    expect(await problems({ where: 'x.md:1', words: ['failures', '--batches', 'N'] })).toEqual([
      'x.md:1: scan-gateway failures: --batches is not an option of this command',
    ]);
    expect(await problems({ where: 'x.md:2', words: ['buffer', 'restore', 'FILE'] })).toEqual([
      'x.md:2: scan-gateway buffer restore: no such command',
    ]);
    expect(await problems({ where: 'x.md:3', words: ['trace', 'PK-1', '[--depth', 'N]'] })).toEqual(
      [],
    );
  });
});
