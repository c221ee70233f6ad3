#!/usr/bin/env bash
# `npm run package [-- [--arch amd64|arm64] [OUT_DIR]]`: builds scan-gateway_<version>_<arch>.deb and
# its .sha256 in OUT_DIR (default release/), for this machine's architecture unless --arch names
# another. The package carries its own Node.js runtime (runtimes/package.json, scanGateway.bundled:
# the official node-linux-<arch> binary from the npm registry) in /usr/lib/scan-gateway/bin/node,
# and native modules for that runtime and architecture:
# - better-sqlite3 and serialport: their Node-API binaries shipped inside their npm packages
#   (prebuilds/linux-<arch>), stable across Node.js majors;
# - unix-dgram (sd_notify): built here by node-gyp against the bundled runtime's headers; for arm64
#   with Debian's aarch64-linux-gnu-gcc/g++ (gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu).
# Needs dpkg-deb, strip (and aarch64-linux-gnu-strip for arm64), npm and Node.js; nothing but the npm
# registry is reached (the runtime package once, and for another architecture its modules; npm's
# cache keeps them).
# Layout and the reasons for it: docs/operations.md, "1. Install from the package".
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)

arch=$(dpkg --print-architecture)
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) arch="${2:?--arch needs amd64 or arm64}"; shift 2 ;;
    --arch=*) arch="${1#--arch=}"; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "package: unknown option $1 (--arch amd64|arm64, then the output folder)" >&2; exit 2 ;;
    *) out="$1"; shift ;;
  esac
done
out=$(realpath -m "${out:-release}")

# One package build at a time in a tree: each rebuilds dist/ (and may install a runtime folder), and
# two at once, such as the package tests side by side, read each other's half-written files. The
# lock is on the tree's folder itself and goes with this process.
exec 9<"$repo"
if ! flock -n 9; then
  echo "package: another package build is running in $repo; waiting for it to end" >&2
  flock 9
fi

case "$arch" in
  amd64) nodearch=x64; gnu=x86_64-linux-gnu; elf='X86-64' ;;
  arm64) nodearch=arm64; gnu=aarch64-linux-gnu; elf='AArch64' ;;
  *) echo "package: architecture $arch is not supported (amd64, arm64)" >&2; exit 2 ;;
esac
host=$(dpkg --print-architecture)
strip_tool=strip
cross=()
if [ "$arch" != "$host" ]; then
  [ "$host" = amd64 ] || { echo "package: cross-building is set up from amd64 only (this machine is $host)" >&2; exit 2; }
  for tool in "$gnu-gcc" "$gnu-g++" "$gnu-strip"; do
    command -v "$tool" >/dev/null || { echo "package: $tool is missing (apt-get install gcc-$gnu g++-$gnu)" >&2; exit 2; }
  done
  strip_tool="$gnu-strip"
  cross=(CC="$gnu-gcc" CXX="$gnu-g++" LINK="$gnu-g++" AR="$gnu-ar")
fi

version=$(node -p "require('./package.json').version")
deb="scan-gateway_${version}_${arch}.deb"

# The bundled runtime: runtimes/node_modules holds this machine's (npm ci --prefix runtimes, as CI
# does); another architecture's goes into runtimes/arch-<nodearch>/ (npm ci --cpu, from the same lock).
line=$(node -p "require('./runtimes/package.json').scanGateway.bundled")
runtime="runtimes/node_modules/node${line}-${nodearch}"
if [ ! -x "$runtime/bin/node" ]; then
  dir="runtimes/arch-${nodearch}"
  runtime="$dir/node_modules/node${line}-${nodearch}"
  if [ ! -x "$runtime/bin/node" ]; then
    mkdir -p "$dir"
    cp runtimes/package.json runtimes/package-lock.json "$dir/"
    (cd "$dir" && npm ci --cpu="$nodearch" --os=linux --no-audit --no-fund --ignore-scripts >/dev/null)
  fi
fi
[ -x "$runtime/bin/node" ] && [ -f "$runtime/include/node/node_api.h" ] || { echo "package: the Node.js $line runtime for $nodearch is not in $runtime" >&2; exit 1; }
runtime=$(realpath "$runtime")
node_version=$(node -p "require('$runtime/package.json').version")

npm run build >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/root"
app="$root/usr/lib/scan-gateway"
doc="$root/usr/share/doc/scan-gateway"
install -d "$app/dist" "$app/config" "$app/bin" "$doc/examples" "$root/usr/bin" "$root/etc/scan-gateway" \
  "$root/usr/lib/systemd/system" "$root/usr/lib/sysusers.d" "$root/usr/lib/tmpfiles.d" \
  "$root/usr/share/man/man1" "$root/usr/share/lintian/overrides" "$root/DEBIAN"

# The runtime: the node executable alone (no headers, no npm, no docs of its own), without its
# debugging symbols (117 instead of 150 MB; the dynamic symbol table that addons link against stays).
install -m 0755 "$runtime/bin/node" "$app/bin/node"
"$strip_tool" --strip-unneeded --remove-section=.comment --remove-section=.note "$app/bin/node"

# The program: compiled JavaScript (no source maps: they point at sources the package does not hold).
cp -a dist/src "$app/dist/src"
find "$app/dist" -name '*.map' -delete
cp package.json package-lock.json "$app/"
# The sandbox's demo secret (scan-gateway sandbox reads it beside the program) and the demo config.
cp config/demo.yaml config/demo-client-secret "$app/config/"

# The workspace packages (packages/: the contract and the service kit, shared with the sandbox,
# and the sandbox that `scan-gateway sandbox` and the demo run): their package.json and compiled
# dist/, where npm's prune and ci below expect the workspaces of package.json.
for pkg in packages/*/; do
  pkg=${pkg%/}
  install -d "$app/$pkg"
  cp "$pkg/package.json" "$app/$pkg/"
  cp -a "$pkg/dist" "$app/$pkg/dist"
done
find "$app/packages" \( -name '*.map' -o -name '.tsbuildinfo' \) -type f -delete

# Production modules: the installed tree without the development dependencies (no network, no
# scripts run). The compiler and our type declarations are development dependencies, so they are
# not in it; what is left of @types are declarations that production modules list as their own
# dependencies (mqtt's @types/ws and @types/readable-stream), never loaded at run time.
if [ "$arch" = "$host" ]; then
  cp -a node_modules "$app/node_modules"
  (cd "$app" && npm prune --omit=dev --ignore-scripts --offline --no-audit --no-fund >/dev/null 2>&1)
else
  # Another architecture's modules: the lock's production tree as npm installs it there, with that
  # architecture's platform packages (@node-rs/crc32-linux-arm64-gnu, say) and no install script run.
  (cd "$app" && npm ci --omit=dev --ignore-scripts --cpu="$nodearch" --os=linux --libc=glibc --no-audit --no-fund >/dev/null)
fi
rm -rf "$app/node_modules/@types" "$app/node_modules/.bin" "$app/node_modules/.package-lock.json"
[ ! -e "$app/node_modules/typescript" ] || { echo "package: typescript is in the production tree: a build-only package is listed under dependencies" >&2; exit 1; }
# npm links each workspace into node_modules (node_modules/@scan-gateway/sandbox -> ../../packages/sandbox):
# the package holds the real files there instead, so node_modules resolves as any installed module's,
# and packages/ goes.
for link in "$app"/node_modules/@scan-gateway/*; do
  [ -L "$link" ] || { echo "package: $link is not the link to a workspace npm makes" >&2; exit 1; }
  target=$(realpath "$link")
  case "$target" in "$app"/packages/*) ;; *) echo "package: $link points outside the package ($target)" >&2; exit 1 ;; esac
  rm "$link"
  cp -a "$target" "$link"
done
rm -rf "$app/packages"

# Native modules for the bundled runtime and the target architecture.
# unix-dgram (nan, so tied to one Node.js ABI): built against the bundled runtime's headers.
m="$app/node_modules/unix-dgram"
rm -rf "$m/build"
(cd "$m" && env "${cross[@]}" node "$repo/node_modules/node-gyp/bin/node-gyp.js" rebuild --release --arch="$nodearch" --nodedir="$runtime" --jobs=2 >"$work/node-gyp.log" 2>&1) || {
  cat "$work/node-gyp.log" >&2; echo "package: unix-dgram did not build for $arch against Node.js $node_version" >&2; exit 1; }
# serialport's bindings: its Node-API prebuild for the target (node-gyp-build takes a local build/ first).
rm -rf "$app/node_modules/@serialport/bindings-cpp/build"
# Build leftovers: sources, objects, makefiles.
for m in "$app/node_modules/better-sqlite3" "$app/node_modules/unix-dgram"; do
  [ -d "$m" ] || continue
  rm -rf "$m/deps" "$m/src" "$m/build/Release/obj" "$m/build/Release/obj.target" "$m/build/Release/.deps" \
    "$m/build/Release/test_extension.node" "$m/build/Release/"*.a "$m/build/"*.mk "$m/build/Makefile" "$m/build/config.gypi" "$m/build/"*.Makefile
done
# Prebuilt binaries of other platforms: folders (serialport: prebuilds/linux-x64/) and files
# (better-sqlite3: prebuilds/linux-x64.node), and musl builds (Debian is glibc).
find "$app/node_modules" -path '*/prebuilds/*' -mindepth 1 -maxdepth 4 -type d -name '*-*' ! -name "linux-$nodearch" -prune -exec rm -rf {} +
find "$app/node_modules" -path '*/prebuilds/*' -type f -name '*.node' ! -path "*/linux-$nodearch/*" ! -name "linux-$nodearch.node" -delete
find "$app/node_modules" -name '*.musl.node' -delete
# Every native module left is an ELF object of the target architecture (a wrong one fails here, not on site).
while IFS= read -r -d '' so; do
  machine=$(LC_ALL=C readelf -h "$so" | sed -n 's/^ *Machine: *//p')
  case "$machine" in *"$elf"*) ;; *) echo "package: $so is for '$machine', not $arch" >&2; exit 1 ;; esac
done < <(find "$app" -name '*.node' -type f -print0)
for need in better-sqlite3/prebuilds/linux-$nodearch.node unix-dgram/build/Release/unix_dgram.node @serialport/bindings-cpp/prebuilds/linux-$nodearch \
  @scan-gateway/contract/dist/contract.js @scan-gateway/service-kit/dist/errors.js @scan-gateway/sandbox/dist/index.js node-forge/package.json; do
  [ -e "$app/node_modules/$need" ] || { echo "package: $need is missing" >&2; exit 1; }
done
# The modules' own tests, docs, examples, repository files and shell scripts: never loaded at run time.
find "$app/node_modules" -mindepth 2 -maxdepth 3 -type d \( -name test -o -name tests -o -name __tests__ -o -name integration -o -name benchmarks -o -name bench \
  -o -name examples -o -name example -o -name docs -o -name .github -o -name .husky -o -name scripts \) -prune -exec rm -rf {} +
find "$app/node_modules" -type f \( -name '.git*' -o -name '*.sh' -o -name '*.html' -o -name '.editorconfig' -o -name '.taprc' -o -name '.nycrc*' -o -name '.prettierrc*' \) -delete
# Native modules without symbols (smaller, and Debian ships stripped objects).
find "$app/node_modules" -name '*.node' -type f -exec "$strip_tool" --strip-unneeded --remove-section=.comment --remove-section=.note {} +
find "$app/node_modules" \( -name '*.md' ! -iname 'license*' -o -name '*.ts' -o -name '*.map' -o -name '.npmignore' -o -name '.eslintrc*' -o -name '.travis.yml' -o -name '*.gyp' -o -name '*.gypi' \) -type f -delete
find "$app/node_modules" -type d -empty -delete

# /usr/bin/scan-gateway, the unit (the bundled runtime, the paths of the package), user and folders.
install -m 0755 packaging/deb/scan-gateway.sh "$root/usr/bin/scan-gateway"
# What postinst asks before it (re)starts the service: config check as the unit would start.
install -m 0644 packaging/deb/service-check.mjs "$app/service-check.mjs"
sed -e '/^ExecStart=/s#^ExecStart=/usr/bin/node #ExecStart=/usr/lib/scan-gateway/bin/node #' \
    -e '/^ExecStart=/s# /opt/scan-gateway/dist/src/main.js # /usr/lib/scan-gateway/dist/src/main.js #' \
    -e 's#^Documentation=.*#Documentation=file:/usr/share/doc/scan-gateway/operations.md man:scan-gateway(1)#' \
    -e 's#^\#   install -m 0644 systemd/scan-gateway.service /etc/systemd/system/#\#   installed by the scan-gateway package#' \
    systemd/scan-gateway.service >"$root/usr/lib/systemd/system/scan-gateway.service"
grep -q '^ExecStart=/usr/lib/scan-gateway/bin/node \(--[^ ]* \)*/usr/lib/scan-gateway/dist/src/main.js ' "$root/usr/lib/systemd/system/scan-gateway.service" || { echo "package: the unit's ExecStart was not rewritten" >&2; exit 1; }
install -m 0644 packaging/deb/sysusers.conf "$root/usr/lib/sysusers.d/scan-gateway.conf"
install -m 0644 packaging/deb/tmpfiles.conf "$root/usr/lib/tmpfiles.d/scan-gateway.conf"

# The starter configuration (a conffile: dpkg keeps local edits on upgrade).
node dist/src/main.js config init --input files --site CHANGE-ME --timezone UTC >"$root/etc/scan-gateway/config.yaml"

# Documentation, the man page, the examples and the monitoring files; the runtime's licence.
cp docs/*.md "$doc/"
# The images the documents show (docs/operations.md: the health page, the station screen), under
# the same relative path, so the installed Markdown renders whole.
install -d "$doc/images"
install -m 0644 docs/images/* "$doc/images/"
cp config/example.yaml "$doc/examples/"
# Two nodes for one line: keepalived holds the line's address where the gateway leads (docs/high-availability.md).
install -d "$doc/examples/keepalived"
install -m 0644 packaging/keepalived/keepalived.conf "$doc/examples/keepalived/"
install -m 0755 packaging/keepalived/scan-gateway-is-leader "$doc/examples/keepalived/"
[ -d monitoring ] && cp -r monitoring "$doc/monitoring"
# The runtime's licence (Node.js's own and those of the parts it bundles) travels beside it.
install -m 0644 "$runtime/LICENSE" "$doc/node.LICENSE"
{ cat packaging/deb/copyright; printf '\nFiles: usr/lib/scan-gateway/bin/node\nCopyright: Node.js contributors and the authors of the parts it bundles\nLicense: Node.js\n See /usr/share/doc/scan-gateway/node.LICENSE (Node.js %s).\n' "$node_version"; } >"$doc/copyright"
# The changelog: the released sections of CHANGELOG.md, the user-visible changes of each version
# (a version without its section there stops the build).
node packaging/deb/debian-changelog.mjs CHANGELOG.md "$version" "Bundled runtime: Node.js $node_version." >"$work/changelog"
gzip -9n <"$work/changelog" >"$doc/changelog.gz"
{
  printf '.TH SCAN-GATEWAY 1 "" "scan-gateway %s" "User Commands"\n' "$version"
  printf '.SH NAME\nscan-gateway \\- edge daemon delivering barcode reads to a traceability service\n'
  printf '.SH SYNOPSIS\n.B scan-gateway\n.I command\n[\\fIoptions\\fR]\n'
  printf '.SH DESCRIPTION\nEvery command and option, as \\fBscan-gateway \\-\\-help\\fR prints them:\n.PP\n.nf\n'
  node dist/src/main.js --help | sed -e 's/\\/\\\\/g' -e 's/^\./\\\&./'
  printf '.fi\n.SH FILES\n/etc/scan-gateway/config.yaml, /var/lib/scan-gateway/, /usr/lib/systemd/system/scan-gateway.service,\n'
  printf '/usr/lib/scan-gateway/bin/node (the Node.js %s runtime of this package)\n' "$node_version"
  printf '.SH SEE ALSO\n/usr/share/doc/scan-gateway/operations.md, /usr/share/doc/scan-gateway/cli.md\n'
} | gzip -9n >"$root/usr/share/man/man1/scan-gateway.1.gz"
install -m 0644 packaging/deb/lintian-overrides "$root/usr/share/lintian/overrides/scan-gateway"

# Modes: directories 0755, files 0644 unless executable (the tar of dpkg-deb keeps them).
find "$root" -type d -exec chmod 0755 {} +
find "$root" -type f ! -perm /111 -exec chmod 0644 {} +
# Executable stay the maintainer scripts, /usr/bin/scan-gateway and the runtime. Scripts with a
# `#!/usr/bin/env node` line (dist/src/main.js, the modules' command-line tools) lose that line (an
# empty one keeps the line numbers of stack traces) and the execute bit: it would look for a system
# node, which the package neither needs nor brings; /usr/bin/scan-gateway runs main.js with the
# bundled one. Native modules (.node) are loaded with dlopen, which needs no execute bit.
find "$root" -type f -perm /111 ! -path '*/DEBIAN/*' ! -path '*/usr/bin/*' ! -path '*/usr/lib/scan-gateway/bin/node' -exec chmod 0644 {} +
node -e 'const fs = require("node:fs"), path = require("node:path");
  const walk = (d) => { for (const e of fs.readdirSync(d, { withFileTypes: true })) { const p = path.join(d, e.name);
    if (e.isDirectory()) walk(p); else if (e.isFile() && !p.endsWith(".node")) { const b = Buffer.alloc(2); const fd = fs.openSync(p, "r"); fs.readSync(fd, b, 0, 2, 0); fs.closeSync(fd);
      if (b.toString() !== "#!") continue;
      const text = fs.readFileSync(p, "utf8"), nl = text.indexOf("\n");
      if (!/^#! ?(\/usr\/bin\/env node|\/usr\/bin\/node)( |$)/.test(text.slice(0, nl))) throw new Error(p + ": unexpected interpreter line " + text.slice(0, nl));
      fs.writeFileSync(p, text.slice(nl)); } } };
  walk(process.argv[1]);' "$app"

# Control files.
for f in postinst prerm postrm; do install -m 0755 "packaging/deb/$f" "$root/DEBIAN/$f"; done
install -m 0644 packaging/deb/conffiles "$root/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" -e "s/@NODE_VERSION@/$node_version/" packaging/deb/control.in >"$root/DEBIAN/control"
(cd "$root" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -print0 | sort -z | xargs -0 md5sum | sed 's# \./# #') >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums"

mkdir -p "$out"
dpkg-deb --root-owner-group -Zxz --build "$root" "$out/$deb" >/dev/null
(cd "$out" && sha256sum "$deb" >"$deb.sha256")
# The size a site downloads and the size it installs, in KiB (stderr: stdout's last line is the path).
echo "package: $deb with Node.js $node_version: $(( $(stat -c %s "$out/$deb") / 1024 )) KiB, $size KiB installed" >&2
echo "$out/$deb"
