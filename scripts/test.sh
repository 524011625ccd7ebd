#!/usr/bin/env bash
# One command: install what is needed, build everything and run every test:
#   1. RelWithDebInfo build: GoogleTest units, PHPUnit, end-to-end tests (real binary, PHP, curl, sockets),
#      the servers with one event loop (http.io_threads: 1).
#   2. Debug build with AddressSanitizer + UndefinedBehaviorSanitizer: the same suite again, with two loops.
#   3. RelWithDebInfo build with ThreadSanitizer: the same suite again, with two loops (the loops' threads
#      share the pool); any data race fails the run (ferry exits 66, the test sees it).
# Passes 2 and 3 are unity builds (FERRY_UNITY: files compiled in batches, half the CPU time); pass 1 compiles
# one file at a time, so a missing include still fails somewhere.
# Set FERRY_SKIP_ASAN=1 / FERRY_SKIP_TSAN=1 to leave out pass 2 / pass 3.
# Every skipped test is listed after its pass, with its reason. A skip fails the run unless it is one this
# machine or pass cannot run (FERRY_ALLOWED_SKIPS, built below: RSS under a sanitizer, a CPU count);
# FERRY_STRICT_SKIPS=0 lets any skip pass (a machine without what scripts/setup.sh installs).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
bash scripts/setup.sh

export FERRY_STRICT_SKIPS=${FERRY_STRICT_SKIPS:-1}
machine_skips=()
[ "$jobs" -ne 2 ] && machine_skips+=("on two CPUs only")
[ "$jobs" -lt 2 ] && machine_skips+=("needs two usable CPUs")
# ctest in DIR with the skips allowed in this pass (extra ones as arguments), then the pass's skips listed.
run_tests() {
  local dir=$1; shift
  local allowed=("${machine_skips[@]}" "$@") IFS='|'
  export FERRY_ALLOWED_SKIPS="${allowed[*]}" FERRY_SKIP_LOG="$PWD/$dir/skipped-tests.txt"
  unset IFS
  rm -f "$FERRY_SKIP_LOG"
  # Unit, PHPUnit, docs and fuzz-replay tests two at a time; the end-to-end tests (timing against real
  # servers) one at a time.
  (cd "$dir" && ctest --output-on-failure --timeout "$CTEST_TIMEOUT" -j"$jobs" -E '^e2e[.]' &&
    ctest --output-on-failure --timeout "$CTEST_TIMEOUT" -R '^e2e[.]')
  if [ -s "$FERRY_SKIP_LOG" ]; then echo "== skipped in $dir:"; cat "$FERRY_SKIP_LOG"; else echo "== no test skipped in $dir"; fi
}

echo "== build (RelWithDebInfo)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFERRY_TESTS=ON >/dev/null
cmake --build build -j"$jobs"
echo "== tests (RelWithDebInfo, one event loop)"
FERRY_E2E_IO_THREADS=1 CTEST_TIMEOUT=600 run_tests build

if [ "${FERRY_SKIP_ASAN:-0}" != "1" ]; then
  echo "== build (Debug, ASan+UBSan)"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DFERRY_SANITIZE=ON -DFERRY_UNITY=ON -DFERRY_TESTS=ON >/dev/null
  cmake --build build-asan -j"$jobs"
  echo "== tests (Debug, ASan+UBSan, two event loops)"
  FERRY_E2E_IO_THREADS=2 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 CTEST_TIMEOUT=900 run_tests build-asan "under a sanitizer"
fi

if [ "${FERRY_SKIP_TSAN:-0}" != "1" ]; then
  echo "== build (RelWithDebInfo, TSan)"
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFERRY_TSAN=ON -DFERRY_UNITY=ON -DFERRY_TESTS=ON >/dev/null
  cmake --build build-tsan -j"$jobs"
  echo "== tests (RelWithDebInfo, TSan, two event loops)"
  FERRY_E2E_IO_THREADS=2 TSAN_OPTIONS=exitcode=66:halt_on_error=0 CTEST_TIMEOUT=900 \
    run_tests build-tsan "under a sanitizer"
fi
echo "== all tests passed"
