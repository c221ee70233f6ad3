#!/bin/sh
# scan-gateway: runs the program of this package with the package's own Node.js runtime (a system
# node, of any version or none, is not used). The paths are found from this script's own place, so
# an unpacked copy (dpkg-deb -x) runs its own files too.
set -e
here=$(dirname "$(readlink -f "$0")")
exec "$here/../lib/scan-gateway/bin/node" "$here/../lib/scan-gateway/dist/src/main.js" "$@"
