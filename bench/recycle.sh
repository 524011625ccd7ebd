#!/usr/bin/env bash
# What max_jobs recycling costs, measured finely enough to tell a few per cent on a noisy VM (issue 9):
# paired ABBA rounds of `wrk -t2 -c64` against a max_jobs: 0 server, each round's ratio, and the median
# ratio with a bootstrap 95 % interval. An A/A pair (a second, identical max_jobs: 0 server) shows what the
# method reads for no difference, and a "never reached" pair (max_jobs far above what a run serves) shows
# whether setting max_jobs costs anything by itself. See bench/README.md, "Recycling".
#
# Knobs (environment):
#   ROUNDS    ABBA rounds per pair (default 20); each round is 4 wrk runs of DURATION seconds
#   DURATION  seconds per wrk run (default 2)
#   WORKERS   PHP workers (default 2)
#   MAX_JOBS  max_jobs of the recycling targets (default 10000)
#   PAIRS     comma-separated subset of: aa,never,maxjobs,normal,fork0,fork (default aa,never,maxjobs,normal,fork);
#             maxjobs has the default recycle_priority (auto: idle where ferry may restore priority), normal
#             sets recycle_priority: normal
#   REPORT    report file under bench/results (default recycle.md)
#   FERRY_BIN use this ferry binary instead of building build/ferry
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-20}
DURATION=${DURATION:-2}
WORKERS=${WORKERS:-2}
MAX_JOBS=${MAX_JOBS:-10000}
PAIRS=${PAIRS:-aa,never,maxjobs,normal,fork}
REPORT=${REPORT:-recycle.md}
[[ "$REPORT" =~ ^[A-Za-z0-9._-]+\.md$ ]] || { echo "REPORT must be a file name ending in .md" >&2; exit 1; }
RESULTS_DIR="$ROOT/bench/results"
CMDLINE="ROUNDS=$ROUNDS DURATION=$DURATION WORKERS=$WORKERS MAX_JOBS=$MAX_JOBS PAIRS=$PAIRS bench/recycle.sh"
FERRY_HTTP_EXTRA=""

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
bench_prepare wrk curl php python3 awk
for v in ROUNDS DURATION WORKERS MAX_JOBS; do
  [[ "${!v}" =~ ^[0-9]+$ && "${!v}" -ge 1 ]] || die "$v must be a positive integer"
done
build_ferry
mkdir -p "$RESULTS_DIR"

HELLO_PHP="$ROOT/tests/php/hello.php"
start_ferry base "$HELLO_PHP" "$FERRY"
declare -A LABEL=(
  [aa]="A/A: a second max_jobs: 0 server (what the method reads for no difference)"
  [never]="max_jobs: 1000000000, never reached"
  [maxjobs]="max_jobs: $MAX_JOBS"
  [normal]="max_jobs: $MAX_JOBS, recycle_priority: normal"
  [fork0]="max_jobs: 0, fork: true (forked workers that never recycle)"
  [fork]="max_jobs: $MAX_JOBS, fork: true"
)
IFS=',' read -r -a SELECTED <<<"$PAIRS"
for p in "${SELECTED[@]}"; do
  case "$p" in
    aa) start_ferry aa "$HELLO_PHP" "$FERRY" ;;
    never) start_ferry never "$HELLO_PHP" "$FERRY" "    max_jobs: 1000000000" ;;
    maxjobs) start_ferry maxjobs "$HELLO_PHP" "$FERRY" "    max_jobs: $MAX_JOBS" ;;
    normal) start_ferry normal "$HELLO_PHP" "$FERRY" "    max_jobs: $MAX_JOBS
    recycle_priority: normal" ;;
    fork0) start_ferry fork0 "$HELLO_PHP" "$FERRY" "    fork: true" ;;
    fork) start_ferry fork "$HELLO_PHP" "$FERRY" "    max_jobs: $MAX_JOBS
    fork: true" ;;
    *) die "unknown pair '$p' (known: aa,never,maxjobs,normal,fork0,fork)" ;;
  esac
done

rps() { wrk -t2 -c64 -d"${DURATION}s" "${URL[$1]}" | awk '/^Requests\/sec/ { print $2 }'; }
ready_count() { grep -c ' ready (' "${LOGS[$1]}" || true; }

for t in base "${SELECTED[@]}"; do wrk -t2 -c64 -d2s "${URL[$t]}" >/dev/null; done  # warm-up
declare -A RATIOS=() READY0=() SECS=()
for p in "${SELECTED[@]}"; do READY0[$p]=$(ready_count "$p"); SECS[$p]=0; done
for ((r = 1; r <= ROUNDS; r++)); do
  for p in "${SELECTED[@]}"; do
    a1=$(rps base); b1=$(rps "$p"); b2=$(rps "$p"); a2=$(rps base)
    RATIOS[$p]+="$(awk -v a1="$a1" -v a2="$a2" -v b1="$b1" -v b2="$b2" 'BEGIN { printf "%.4f", (b1 + b2) / (a1 + a2) }') "
    SECS[$p]=$((SECS[$p] + 2 * DURATION))
  done
  log "round $r of $ROUNDS done"
done

table="| target (against max_jobs: 0, same run) | median ratio | 95 % interval (bootstrap) | cost | recycles per second |
|---|---:|---:|---:|---:|"
for p in "${SELECTED[@]}"; do
  recycles=$(( $(ready_count "$p") - READY0[$p] ))
  line=$(python3 - "${RATIOS[$p]}" <<'EOF'
import random, statistics, sys
r = [float(x) for x in sys.argv[1].split()]
random.seed(9)
boot = sorted(statistics.median(random.choices(r, k=len(r))) for _ in range(4000))
m = statistics.median(r)
print("%.3f× | %.3f–%.3f | %+.1f %%" % (m, boot[100], boot[3899], (m - 1) * 100))
EOF
)
  table+="
| ${LABEL[$p]} | $line | $(awk -v n="$recycles" -v s="${SECS[$p]}" 'BEGIN { printf "%.2f", n / s }') |"
done
raw=""
for p in "${SELECTED[@]}"; do raw+="$p: ${RATIOS[$p]% }; "; done
notes="- each round: base, target, target, base (ABBA), wrk -t2 -c64 -d${DURATION}s each; the round's ratio is the
  target's two runs over base's two; recycles per second counts the workers that became ready during the
  target's runs (a worker stopped at max_jobs is replaced by one)
- per-round ratios: ${raw%; }"
publish_report "$REPORT" "Ferry recycling benchmark" "per-round ratios in the notes" <<EOF
- ferry: $("$FERRY" --version), git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown); $WORKERS workers, tests/php/hello.php, opcache on
- recycle_priority auto here: $(grep -qs 'replacements boot at normal priority' "${LOGS[base]}" && echo "normal (ferry may not restore a worker's priority)" || echo "idle (SCHED_IDLE boots and exits)")
EOF
