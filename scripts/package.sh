#!/usr/bin/env bash
# Builds Ferry's Debian package, ferry_<version>_<arch>.deb: /usr/bin/ferry, the PHP library under
# /usr/share/ferry/php-worker, README, docs and examples under /usr/share/doc/ferry, ferry.service (user
# "ferry", created by its postinst). CPack's DEB generator; dependencies found by dpkg-shlibdeps.
#
#   bash scripts/package.sh                      a Release build of ferry alone in build-package/, then the
#                                                package in build-package/packages/
#   bash scripts/package.sh --build-dir DIR      the package of an existing build (the tests package theirs)
#
# Install it with `apt install ./build-package/packages/ferry_*.deb`, then see docs/deployment.md.
set -euo pipefail
cd "$(dirname "$0")/.."
build=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=${2:?--build-dir needs a directory}; shift 2 ;;
    -h|--help) sed -n 2,10p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "package.sh: unknown option \"$1\" (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$build" ]; then
  bash scripts/setup.sh --serve
  build=build-package
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DFERRY_TESTS=OFF >/dev/null
  cmake --build "$build" --target ferry -j"$(nproc)"
fi
[ -f "$build/CMakeCache.txt" ] || { echo "package.sh: $build is not a CMake build directory" >&2; exit 2; }
rm -f "$build"/packages/ferry_*.deb
# cpack builds what is out of date (its preinstall step), installs into a staging tree, strips the binary.
log="$build/packages/cpack.log"
mkdir -p "$build/packages"
(cd "$build" && cpack -G DEB) >"$log" 2>&1 || { cat "$log" >&2; echo "package.sh: cpack failed" >&2; exit 1; }
deb=$(ls "$build"/packages/ferry_*.deb)
dpkg-deb --field "$deb" Package Version Architecture Depends
echo "$deb"
