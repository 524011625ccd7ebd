#!/usr/bin/env bash
# One command: install what is needed, build everything and run every test:
#   1. RelWithDebInfo build: GoogleTest units, PHPUnit, end-to-end tests (real binary, PHP, curl, sockets).
#   2. Debug build with AddressSanitizer + UndefinedBehaviorSanitizer: the same suite again.
# Set FERRY_SKIP_ASAN=1 to run only the first pass.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
bash scripts/setup.sh

echo "== build (RelWithDebInfo)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFERRY_TESTS=ON >/dev/null
cmake --build build -j"$jobs"
echo "== tests (RelWithDebInfo)"
(cd build && ctest --output-on-failure --timeout 600)

if [ "${FERRY_SKIP_ASAN:-0}" != "1" ]; then
  echo "== build (Debug, ASan+UBSan)"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DFERRY_SANITIZE=ON -DFERRY_TESTS=ON >/dev/null
  cmake --build build-asan -j"$jobs"
  echo "== tests (Debug, ASan+UBSan)"
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  (cd build-asan && ctest --output-on-failure --timeout 900)
fi
echo "== all tests passed"
