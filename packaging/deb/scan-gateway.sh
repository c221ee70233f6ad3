#!/bin/sh
# scan-gateway: runs the program of this package with the system's Node.js. The path is found from
# this script's own place, so an unpacked copy (dpkg-deb -x) runs its own files too.
set -e
here=$(dirname "$(readlink -f "$0")")
exec node "$here/../lib/scan-gateway/dist/src/main.js" "$@"
