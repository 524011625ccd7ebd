#!/usr/bin/env bash
# Runs every fuzz target of fuzz/ (libFuzzer, clang-14) for a while and writes a report of what it did:
# bench/results/fuzz-<date>.md, per target executions, exec/s, coverage (cov / ft of libFuzzer's last status
# line), corpus size, seconds, crashes and peak RSS.
#
#   bench/fuzz.sh [target...]          all targets (fuzz/CMakeLists.txt's list) when none is named
#   FUZZ_SECONDS=600                   seconds per target (default 600; SECONDS=... in the environment works too)
#   FUZZ_JOBS=1                        targets at once (1 or 2: this machine has 2 cores)
#
# The fuzz build lives in build-fuzz/ (clang-14, -DFERRY_FUZZ=ON; packages from scripts/setup.sh --fuzz).
# Each target starts from its seeds in fuzz/corpus/<target>/ with fuzz/dict/<target>.dict; the inputs it
# finds go to build-fuzz/fuzz-corpus/<target>/ (never into the repository), crashes to
# build-fuzz/fuzz-artifacts/<target>/, its log to build-fuzz/fuzz-logs/<target>.log. Memory: -rss_limit_mb=2048
# and -malloc_limit_mb=256 (a parser allocating that much on an input of a few KB is a finding).
# A crash is fixed in the code and its input added to fuzz/corpus/<target>/ as a regression case, which the
# normal test run replays (ctest fuzz.replay.<target>).
set -euo pipefail
PER_TARGET=${FUZZ_SECONDS:-$(printenv SECONDS 2>/dev/null || echo 600)}
JOBS=${FUZZ_JOBS:-1}
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build-fuzz

die() { echo "fuzz: error: $*" >&2; exit 1; }
log() { echo "fuzz: $*" >&2; }
[[ "$PER_TARGET" =~ ^[0-9]+$ ]] && [ "$PER_TARGET" -gt 0 ] || die "FUZZ_SECONDS must be a positive number"
[ "$JOBS" = 1 ] || [ "$JOBS" = 2 ] || die "FUZZ_JOBS must be 1 or 2"

bash "$ROOT/scripts/setup.sh" --fuzz >&2 || die "scripts/setup.sh --fuzz failed"

ALL=$(sed 's/#.*//' fuzz/CMakeLists.txt | sed -n '/set(FERRY_FUZZ_TARGETS/,/)/p' | sed 's/set(FERRY_FUZZ_TARGETS//; s/)//' | xargs)
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || read -r -a TARGETS <<<"$ALL"
for t in "${TARGETS[@]}"; do
  [[ " $ALL " == *" $t "* ]] || die "unknown target '$t' (targets: $ALL)"
done

launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
log "building build-fuzz/ (clang-14)"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang-14 \
  -DCMAKE_CXX_COMPILER=clang++-14 -DFERRY_FUZZ=ON -DFERRY_TESTS=OFF "${launcher[@]}" >/dev/null
cmake --build "$BUILD" -j2 >/dev/null || die "the fuzz build failed (cmake --build build-fuzz)"

max_len() {  # target -> -max_len: room for what the target parses, small enough to stay fast
  case "$1" in
    config|multipart|http_request) echo 16384 ;;
    context|ws_frame) echo 8192 ;;
    static_path|utf8) echo 1024 ;;
    *) echo 4096 ;;
  esac
}

run_target() {  # target: one libFuzzer run of PER_TARGET seconds
  local t=$1
  local scratch=$BUILD/fuzz-corpus/$t art=$BUILD/fuzz-artifacts/$t logf=$BUILD/fuzz-logs/$t.log
  rm -rf "$art" # this run's crashes only
  mkdir -p "$scratch" "$art" "$BUILD/fuzz-logs"
  log "$t: ${PER_TARGET}s"
  local start end
  start=$(date +%s)
  # The first directory gets the new inputs; the seeds are read only.
  "$BUILD/fuzz/ferry_fuzz_$t" "$scratch" "$ROOT/fuzz/corpus/$t" -dict="$ROOT/fuzz/dict/$t.dict" \
    -max_len="$(max_len "$t")" -max_total_time="$PER_TARGET" -rss_limit_mb=2048 -malloc_limit_mb=256 \
    -timeout=10 -artifact_prefix="$art/" -print_final_stats=1 >"$logf" 2>&1 || true
  end=$(date +%s)
  echo $((end - start)) >"$BUILD/fuzz-logs/$t.seconds"
}

i=0
for t in "${TARGETS[@]}"; do
  run_target "$t" &
  i=$((i + 1))
  if [ $((i % JOBS)) -eq 0 ]; then wait; fi
done
wait

mkdir -p bench/results
REPORT=bench/results/fuzz-$(date +%Y-%m-%d-%H%M).md
{
  echo "# bench/fuzz.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo
  echo "${PER_TARGET} s per target, $JOBS at a time, $(nproc) CPUs; clang-14 libFuzzer + ASan + UBSan;" \
       "-rss_limit_mb=2048 -malloc_limit_mb=256."
  echo
  echo "| target | executions | exec/s | cov | ft | corpus (files/bytes) | seconds | peak RSS MB | crashes |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---|"
  for t in "${TARGETS[@]}"; do
    logf=$BUILD/fuzz-logs/$t.log
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$logf" | tail -1)
    eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$logf" | tail -1)
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$logf" | tail -1)
    last=$(grep -E '^#[0-9]+' "$logf" | grep -E 'cov: ' | tail -1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p' <<<"$last")
    secs=$(cat "$BUILD/fuzz-logs/$t.seconds" 2>/dev/null || echo '?')
    crashes=$(find "$BUILD/fuzz-artifacts/$t" -type f 2>/dev/null | sed 's|.*/||' | sort | tr '\n' ' ')
    echo "| $t | ${execs:-?} | ${eps:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | $secs | ${rss:-?} | ${crashes:-none} |"
  done
  echo
  echo "Crashes (artifacts in build-fuzz/fuzz-artifacts/<target>/; the first lines of each report):"
  echo
  for t in "${TARGETS[@]}"; do
    grep -m3 -E 'ERROR: |check failed|SUMMARY: ' "$BUILD/fuzz-logs/$t.log" | sed "s|^|- $t: |" || true
  done
} >"$REPORT"
cat "$REPORT"
log "report: $REPORT"
