#!/usr/bin/env bash
# One command: install what is needed, build everything and run every test:
#   1. RelWithDebInfo build: GoogleTest units, PHPUnit, end-to-end tests (real binary, PHP, curl, sockets),
#      the servers with one event loop (http.io_threads: 1).
#   2. Debug build with AddressSanitizer + UndefinedBehaviorSanitizer: the same suite again, with two loops.
#   3. RelWithDebInfo build with ThreadSanitizer: the same suite again, with two loops (the loops' threads
#      share the pool); any data race fails the run (ferry exits 66, the test sees it).
# Set FERRY_SKIP_ASAN=1 / FERRY_SKIP_TSAN=1 to leave out pass 2 / pass 3.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
bash scripts/setup.sh

echo "== build (RelWithDebInfo)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFERRY_TESTS=ON >/dev/null
cmake --build build -j"$jobs"
echo "== tests (RelWithDebInfo, one event loop)"
(cd build && FERRY_E2E_IO_THREADS=1 ctest --output-on-failure --timeout 600)

if [ "${FERRY_SKIP_ASAN:-0}" != "1" ]; then
  echo "== build (Debug, ASan+UBSan)"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DFERRY_SANITIZE=ON -DFERRY_TESTS=ON >/dev/null
  cmake --build build-asan -j"$jobs"
  echo "== tests (Debug, ASan+UBSan, two event loops)"
  (cd build-asan &&
    FERRY_E2E_IO_THREADS=2 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure --timeout 900)
fi

if [ "${FERRY_SKIP_TSAN:-0}" != "1" ]; then
  echo "== build (RelWithDebInfo, TSan)"
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFERRY_TSAN=ON -DFERRY_TESTS=ON >/dev/null
  cmake --build build-tsan -j"$jobs"
  echo "== tests (RelWithDebInfo, TSan, two event loops)"
  (cd build-tsan && FERRY_E2E_IO_THREADS=2 TSAN_OPTIONS=exitcode=66:halt_on_error=0 \
    ctest --output-on-failure --timeout 900)
fi
echo "== all tests passed"
