#!/usr/bin/env bash
# `npm run package [-- OUT_DIR]`: builds scan-gateway_<version>_<arch>.deb and its .sha256 in OUT_DIR
# (default release/), for the architecture of this machine (dpkg --print-architecture): the
# native modules (better-sqlite3, serialport, unix-dgram) are those npm built or fetched here, so
# build an arm64 package on an arm64 machine. Needs dpkg-deb (dpkg) and Node.js; no network: the
# production modules are the installed node_modules with the development ones pruned.
# Layout and the reasons for it: docs/operations.md, "1. Install from the package".
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
out=$(realpath -m "${1:-release}")

version=$(node -p "require('./package.json').version")
arch=$(dpkg --print-architecture)
case "$arch" in
  amd64) nodearch=x64 ;;
  arm64) nodearch=arm64 ;;
  armhf) nodearch=arm ;;
  *) echo "package: architecture $arch is not supported (amd64, arm64, armhf)" >&2; exit 1 ;;
esac
deb="scan-gateway_${version}_${arch}.deb"

npm run build >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/root"
app="$root/usr/lib/scan-gateway"
doc="$root/usr/share/doc/scan-gateway"
install -d "$app/dist" "$app/config" "$doc/examples" "$root/usr/bin" "$root/etc/scan-gateway" \
  "$root/usr/lib/systemd/system" "$root/usr/lib/sysusers.d" "$root/usr/lib/tmpfiles.d" \
  "$root/usr/share/man/man1" "$root/usr/share/lintian/overrides" "$root/DEBIAN"

# The program: compiled JavaScript (no source maps: they point at sources the package does not hold).
cp -a dist/src "$app/dist/src"
find "$app/dist" -name '*.map' -delete
cp package.json package-lock.json "$app/"
# The sandbox's demo secret (scan-gateway sandbox reads it beside the program) and the demo config.
cp config/demo.yaml config/demo-client-secret "$app/config/"

# Production modules: the installed tree without the development dependencies (no network, no
# scripts run), then what only building needed: the compiler and type declarations (listed as
# dependencies so a plain clone builds itself; never loaded at run time), native build leftovers,
# and prebuilt binaries of other platforms.
cp -a node_modules "$app/node_modules"
(cd "$app" && npm prune --omit=dev --ignore-scripts --offline --no-audit --no-fund >/dev/null 2>&1)
rm -rf "$app/node_modules/typescript" "$app/node_modules/@types" "$app/node_modules/.bin" "$app/node_modules/.package-lock.json"
for m in "$app/node_modules/better-sqlite3" "$app/node_modules/unix-dgram"; do
  [ -d "$m" ] || continue
  rm -rf "$m/deps" "$m/src" "$m/build/Release/obj" "$m/build/Release/obj.target" "$m/build/Release/.deps" \
    "$m/build/Release/test_extension.node" "$m/build/Release/"*.a "$m/build/"*.mk "$m/build/Makefile" "$m/build/config.gypi" "$m/build/"*.Makefile
done
find "$app/node_modules" -path '*/prebuilds/*' -mindepth 1 -maxdepth 4 -type d -name '*-*' ! -name "linux-$nodearch" -prune -exec rm -rf {} +
find "$app/node_modules" -name '*.musl.node' -delete
# The modules' own tests, docs, examples, repository files and shell scripts: never loaded at run time.
find "$app/node_modules" -mindepth 2 -maxdepth 3 -type d \( -name test -o -name tests -o -name __tests__ -o -name integration -o -name benchmarks -o -name bench \
  -o -name examples -o -name example -o -name docs -o -name .github -o -name .husky -o -name scripts \) -prune -exec rm -rf {} +
find "$app/node_modules" -type f \( -name '.git*' -o -name '*.sh' -o -name '*.html' -o -name '.editorconfig' -o -name '.taprc' -o -name '.nycrc*' -o -name '.prettierrc*' \) -delete
# Native modules without symbols (smaller, and Debian ships stripped objects).
find "$app/node_modules" -name '*.node' -type f -exec strip --strip-unneeded --remove-section=.comment --remove-section=.note {} +
find "$app/node_modules" \( -name '*.md' ! -iname 'license*' -o -name '*.ts' -o -name '*.map' -o -name '.npmignore' -o -name '.eslintrc*' -o -name '.travis.yml' -o -name '*.gyp' -o -name '*.gypi' \) -type f -delete
find "$app/node_modules" -type d -empty -delete

# /usr/bin/scan-gateway, the unit (paths of the package), user and folders.
install -m 0755 packaging/deb/scan-gateway.sh "$root/usr/bin/scan-gateway"
sed -e '/^ExecStart=/s# /opt/scan-gateway/dist/src/main.js # /usr/lib/scan-gateway/dist/src/main.js #' \
    -e 's#^Documentation=.*#Documentation=file:/usr/share/doc/scan-gateway/operations.md man:scan-gateway(1)#' \
    -e 's#^\#   install -m 0644 systemd/scan-gateway.service /etc/systemd/system/#\#   installed by the scan-gateway package#' \
    systemd/scan-gateway.service >"$root/usr/lib/systemd/system/scan-gateway.service"
grep -q '^ExecStart=/usr/bin/node \(--[^ ]* \)*/usr/lib/scan-gateway/' "$root/usr/lib/systemd/system/scan-gateway.service" || { echo "package: the unit's ExecStart was not rewritten" >&2; exit 1; }
install -m 0644 packaging/deb/sysusers.conf "$root/usr/lib/sysusers.d/scan-gateway.conf"
install -m 0644 packaging/deb/tmpfiles.conf "$root/usr/lib/tmpfiles.d/scan-gateway.conf"

# The starter configuration (a conffile: dpkg keeps local edits on upgrade).
node dist/src/main.js config init --input files --site CHANGE-ME --timezone UTC >"$root/etc/scan-gateway/config.yaml"

# Documentation, the man page, the examples and the monitoring files.
cp docs/*.md "$doc/"
cp config/example.yaml "$doc/examples/"
[ -d monitoring ] && cp -r monitoring "$doc/monitoring"
cp packaging/deb/copyright "$doc/copyright"
date_r=$(date -u -R -d "@${SOURCE_DATE_EPOCH:-$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)}")
printf 'scan-gateway (%s) stable; urgency=medium\n\n  * Release %s; changes: git log of the repository.\n\n -- scan-gateway maintainers <scan-gateway@example.com>  %s\n' \
  "$version" "$version" "$date_r" | gzip -9n >"$doc/changelog.gz"
{
  printf '.TH SCAN-GATEWAY 1 "" "scan-gateway %s" "User Commands"\n' "$version"
  printf '.SH NAME\nscan-gateway \\- edge daemon delivering barcode reads to a traceability service\n'
  printf '.SH SYNOPSIS\n.B scan-gateway\n.I command\n[\\fIoptions\\fR]\n'
  printf '.SH DESCRIPTION\nEvery command and option, as \\fBscan-gateway \\-\\-help\\fR prints them:\n.PP\n.nf\n'
  node dist/src/main.js --help | sed -e 's/\\/\\\\/g' -e 's/^\./\\\&./'
  printf '.fi\n.SH FILES\n/etc/scan-gateway/config.yaml, /var/lib/scan-gateway/, /usr/lib/systemd/system/scan-gateway.service\n'
  printf '.SH SEE ALSO\n/usr/share/doc/scan-gateway/operations.md, /usr/share/doc/scan-gateway/cli.md\n'
} | gzip -9n >"$root/usr/share/man/man1/scan-gateway.1.gz"
install -m 0644 packaging/deb/lintian-overrides "$root/usr/share/lintian/overrides/scan-gateway"

# Control files.
for f in postinst prerm postrm; do install -m 0755 "packaging/deb/$f" "$root/DEBIAN/$f"; done
install -m 0644 packaging/deb/conffiles "$root/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" packaging/deb/control.in >"$root/DEBIAN/control"
(cd "$root" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -print0 | sort -z | xargs -0 md5sum | sed 's# \./# #') >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums"

# Modes: directories 0755, files 0644 unless executable (the tar of dpkg-deb keeps them).
find "$root" -type d -exec chmod 0755 {} +
find "$root" -type f ! -perm /111 -exec chmod 0644 {} +
# Executable stay the maintainer scripts, /usr/bin/scan-gateway and scripts with a #! line (the
# modules' command-line tools); native modules (.node) are loaded with dlopen, which needs no execute bit.
find "$root" -type f -perm /111 ! -path '*/DEBIAN/*' ! -path '*/usr/bin/*' -exec chmod 0644 {} +
node -e 'const fs = require("node:fs"), path = require("node:path");
  const walk = (d) => { for (const e of fs.readdirSync(d, { withFileTypes: true })) { const p = path.join(d, e.name);
    if (e.isDirectory()) walk(p); else if (e.isFile()) { const b = Buffer.alloc(2); const fd = fs.openSync(p, "r"); fs.readSync(fd, b, 0, 2, 0); fs.closeSync(fd);
      if (b.toString() === "#!") fs.chmodSync(p, 0o755); } } };
  walk(process.argv[1]);' "$app"

mkdir -p "$out"
dpkg-deb --root-owner-group -Zxz --build "$root" "$out/$deb" >/dev/null
(cd "$out" && sha256sum "$deb" >"$deb.sha256")
echo "$out/$deb"
