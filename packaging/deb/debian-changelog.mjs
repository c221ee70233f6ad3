// `node packaging/deb/debian-changelog.mjs CHANGELOG.md VERSION NOTE`: the Debian changelog of the
// package (debian-policy 4.4) from the released sections of CHANGELOG.md (Keep a Changelog: a
// `## [X.Y.Z] - YYYY-MM-DD` heading, `### Added`-style groups, `- ` items), newest first, each
// dated at noon UTC of its release day so a rebuild gives the same file. VERSION (package.json's)
// must have a section: a release names what it changes. NOTE, one line, goes at the top of the
// newest entry (the bundled runtime). The Unreleased section is left out: it is not in a release.
import { readFileSync } from 'node:fs';

const [file, version, note] = process.argv.slice(2);
if (!file || !version) {
  console.error('usage: debian-changelog.mjs CHANGELOG.md VERSION [NOTE]');
  process.exit(2);
}
const MAINTAINER = 'scan-gateway maintainers <scan-gateway@example.com>';
const WIDTH = 78;

/** Words of `text` on lines of at most WIDTH columns, the first after `first`, the rest after `rest`. */
function wrap(text, first, rest) {
  const lines = [];
  let line = first;
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line.trim() !== '' && line.length + 1 + word.length > WIDTH && line !== first) {
      lines.push(line);
      line = rest + word;
    } else line += (line === first ? '' : ' ') + word;
  }
  lines.push(line);
  return lines;
}

const releases = [];
let release = null;
let group = null;
let item = null;
const flush = () => {
  if (item !== null && group !== null) group.items.push(item);
  item = null;
};
for (const raw of readFileSync(file, 'utf8').split('\n')) {
  const heading = /^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?/.exec(raw);
  if (heading || /^## /.test(raw)) {
    flush();
    group = null;
    release =
      heading && heading[2]
        ? { version: heading[1], date: heading[2], intro: [], groups: [] }
        : null;
    if (release) releases.push(release);
    continue;
  }
  if (release === null) continue;
  const sub = /^### (.+)/.exec(raw);
  if (sub) {
    flush();
    group = { name: sub[1].trim(), items: [] };
    release.groups.push(group);
  } else if (/^- /.test(raw)) {
    flush();
    item = raw.slice(2).trim();
  } else if (/^\s+\S/.test(raw) && item !== null) {
    item += ` ${raw.trim()}`;
  } else if (raw.trim() !== '' && group === null) {
    release.intro.push(raw.trim());
  }
}
flush();

if (releases[0]?.version !== version) {
  console.error(
    `debian-changelog: ${file} has no section for ${version} at its top (newest released: ${releases[0]?.version ?? 'none'}); add "## [${version}] - YYYY-MM-DD"`,
  );
  process.exit(1);
}
const out = [];
for (const [i, r] of releases.entries()) {
  out.push(`scan-gateway (${r.version}) stable; urgency=medium`, '');
  if (i === 0 && note) out.push(...wrap(note, '  * ', '    '));
  if (r.intro.length > 0) out.push(...wrap(r.intro.join(' '), '  * ', '    '));
  for (const g of r.groups) {
    out.push(`  * ${g.name}:`);
    for (const it of g.items) out.push(...wrap(it, '    - ', '      '));
  }
  const date = new Date(`${r.date}T12:00:00Z`).toUTCString().replace('GMT', '+0000');
  out.push('', ` -- ${MAINTAINER}  ${date}`, '');
}
process.stdout.write(`${out.join('\n')}`);
