#!/usr/bin/env bash
# What max_jobs recycling costs, measured finely enough to tell a few per cent on a noisy VM (issue 9):
# paired ABBA rounds of `wrk -t2 -c64` against a max_jobs: 0 server, each round's ratio, and the median
# ratio with a bootstrap 95 % interval. An A/A pair (a second, identical max_jobs: 0 server) shows what the
# method reads for no difference, and a "never reached" pair (max_jobs far above what a run serves) shows
# whether setting max_jobs costs anything by itself. The boot pairs take ferry out of it: a max_jobs: 0
# server while the script itself starts `php hello.php` with stdin closed (it boots, finds no request and
# ends, as a recycled worker does) at the rate the maxjobs pair recycles: what PHP's boot costs this machine
# whoever starts it, so maxjobs ÷ boot is what ferry's recycling adds to it. See bench/README.md, "Recycling".
#
# Knobs (environment):
#   ROUNDS    ABBA rounds per pair (default 20); each round is 4 wrk runs of DURATION seconds
#   DURATION  seconds per wrk run (default 2)
#   WORKERS   PHP workers (default 2)
#   MAX_JOBS  max_jobs of the recycling targets (default 10000)
#   PAIRS     comma-separated subset of: aa,never,maxjobs,normal,boot,bootnormal,fork0,fork,forkfull,forkext,
#             reexec (default aa,never,maxjobs,normal,boot,fork); maxjobs has the default recycle_priority (auto:
#             idle where ferry may restore priority), normal sets recycle_priority: normal; boot starts the
#             external boots under SCHED_IDLE (chrt --idle 0), bootnormal at normal priority; reexec is a
#             max_jobs: 0 server whose workers replace their own image every MAX_JOBS requests
#             (bench/php/hello_reexec.php: a fresh PHP in the same process, what a new image costs
#             without a new process; the request sent during its boot waits for it); forkext is a
#             max_jobs: 0 server while the script runs
#             bench/php/forker.php, a PHP process with Ferry's library loaded that forks twice (as the fork
#             template did per worker until it forked once, 4895508) and lets both children end at once, at
#             the fork pair's recycle rate (it boots before the wrk run starts, and is killed after it ends):
#             what a new process costs this machine whoever makes it (put fork before forkext in PAIRS)
#   FORKS     forks per round of the forkext pair (default 2; 1: one; 0: the process only wakes)
#   FORK_LIFE_MS  how long each forkext child lives (sleeping, touching nothing) before it ends (default 0: at
#             once; a worker's life in the fork pair is ~2 x WORKERS / recycles per second)
#   BOOT_MS   milliseconds between two external boots or fork rounds (default auto: the maxjobs pair's
#             interval between two recycles so far for boot and bootnormal, the fork pair's for forkext;
#             500 before it has one, or when that pair is not in PAIRS)
#   REPORT    report file under bench/results (default recycle.md)
#   PHP_ARGS  PHP's flags for every worker and external boot, all servers alike (default the benchmarks'
#             "-d opcache.enable=1 -d opcache.enable_cli=1"); e.g. a lean boot (bench/boot_cost.py):
#             "-n -d extension=msgpack -d zend_extension=opcache -d opcache.enable=1 -d opcache.enable_cli=1"
#   PIN       1: every server (ferry and its PHP workers, which inherit its affinity) and the external boots
#             on one CPU, wrk on another (the first two this process may use; default 0: wherever the
#             scheduler puts them). On a VM where waking an
#             idle vCPU is slow, a PHP worker on another CPU than ferry can serve 4x slower than one on the
#             same CPU (bench/README.md, "Recycling"), and every new worker is placed anew: pinning takes
#             that lottery out of the comparison
#   RESTART   1: every round after the first starts every server anew (and warms it up for 1 s) before its
#             runs (default 0: the same servers for the whole run). A server's speed depends a little on the
#             process instance (where its memory landed, which CPU its loop settled on): with the same base
#             server for the whole run, an A/A pair reads 0.97-1.03x for identical servers, which a run
#             cannot average out; restarting makes that luck differ from round to round, so the median
#             covers it (bench/README.md, "Recycling")
#   IO_THREADS  http.io_threads of every ferry server (default: unset, ferry's own default: two loops on 2
#             CPUs with 2 pinned workers, each beside its worker)
#   WORKER    hello (default): tests/php/hello.php, Ferry's library (a fork pair forks from a template that ran
#             the worker's boot); rr: tests/php/rr_worker.php, which speaks the pipes as RoadRunner's packages do
#             without Ferry's library (a fork pair forks from a PHP-level template, docs/protocol.md §8.1: PHP
#             started, the worker script not run); every server and external boot runs the same one
#   APP_CLASSES  with WORKER=rr: the worker first loads a generated app of this many classes of 40 methods
#             (bench/boot_cost.py --app N --write-app), as a framework's boot does (default 0: none)
#   FERRY_BIN use this ferry binary instead of building build/ferry
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-20}
DURATION=${DURATION:-2}
WORKERS=${WORKERS:-2}
MAX_JOBS=${MAX_JOBS:-10000}
PAIRS=${PAIRS:-aa,never,maxjobs,normal,boot,fork}
BOOT_MS=${BOOT_MS:-auto}
REPORT=${REPORT:-recycle.md}
IO_THREADS=${IO_THREADS:-}
PIN=${PIN:-0}
FORKS=${FORKS:-2}
FORK_LIFE_MS=${FORK_LIFE_MS:-0}
RESTART=${RESTART:-0}
WORKER=${WORKER:-hello}
case "$WORKER" in
  hello) HELLO_PHP="$ROOT/tests/php/hello.php" ;;
  rr) HELLO_PHP="$ROOT/tests/php/rr_worker.php"; export RR_FIXTURE_HELLO=1 ;; # servers pass it on
  *) echo "WORKER must be hello or rr (got '$WORKER')" >&2; exit 1 ;;
esac
APP_CLASSES=${APP_CLASSES:-0}
[[ "$APP_CLASSES" =~ ^[0-9]+$ ]] || { echo "APP_CLASSES must be a whole number (got '$APP_CLASSES')" >&2; exit 1; }
[[ "$APP_CLASSES" == 0 || "$WORKER" == rr ]] || { echo "APP_CLASSES needs WORKER=rr" >&2; exit 1; }
APP_NOTE=""
[[ "$APP_CLASSES" == 0 ]] || APP_NOTE=" APP_CLASSES=$APP_CLASSES"
[[ "$REPORT" =~ ^[A-Za-z0-9._-]+\.md$ ]] || { echo "REPORT must be a file name ending in .md" >&2; exit 1; }
RESULTS_DIR="$ROOT/bench/results"
CMDLINE="ROUNDS=$ROUNDS DURATION=$DURATION WORKERS=$WORKERS MAX_JOBS=$MAX_JOBS PAIRS=$PAIRS BOOT_MS=$BOOT_MS PIN=$PIN FORKS=$FORKS FORK_LIFE_MS=$FORK_LIFE_MS RESTART=$RESTART WORKER=$WORKER$APP_NOTE${IO_THREADS:+ IO_THREADS=$IO_THREADS}${PHP_ARGS:+ PHP_ARGS=\"$PHP_ARGS\"} bench/recycle.sh"
[[ -z "$IO_THREADS" || "$IO_THREADS" =~ ^[1-9][0-9]*$ ]] || { echo "IO_THREADS must be a whole number above 0 (got '$IO_THREADS')" >&2; exit 1; }
FERRY_HTTP_EXTRA=${IO_THREADS:+"  io_threads: $IO_THREADS"}

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
bench_prepare wrk curl php python3 awk chrt
if [[ "$APP_CLASSES" != 0 ]]; then  # every server's workers, and the external boots, load it first
  mkdir "$TMP/app"
  python3 "$ROOT/bench/boot_cost.py" --app "$APP_CLASSES" --write-app "$TMP/app" >/dev/null
  export RR_FIXTURE_APP="$TMP/app"
fi
if [[ -n "${PHP_ARGS:-}" ]]; then
  # The flags go into the servers' YAML command string as they are: plain words only.
  [[ "$PHP_ARGS" =~ ^[-A-Za-z0-9_.=/\ ]+$ ]] || die "PHP_ARGS may hold only letters, digits, spaces and -_.=/ (got '$PHP_ARGS')"
  read -r -a PHP_OPCACHE <<<"$PHP_ARGS"
  php "${PHP_OPCACHE[@]}" -r '' || die "php does not start with PHP_ARGS '$PHP_ARGS'"
fi
[[ "$FORKS" =~ ^[0-9]+$ ]] || die "FORKS must be a whole number (got '$FORKS')"
[[ "$FORK_LIFE_MS" =~ ^[0-9]+$ ]] || die "FORK_LIFE_MS must be a whole number of milliseconds (got '$FORK_LIFE_MS')"
for v in ROUNDS DURATION WORKERS MAX_JOBS; do
  [[ "${!v}" =~ ^[0-9]+$ && "${!v}" -ge 1 ]] || die "$v must be a positive integer"
done
[[ "$PIN" == 0 || "$PIN" == 1 ]] || die "PIN must be 0 or 1 (got '$PIN')"
[[ "$RESTART" == 0 || "$RESTART" == 1 ]] || die "RESTART must be 0 or 1 (got '$RESTART')"
WRK_PREFIX=()
SERVER_CPU="" WRK_CPU=""
if [[ "$PIN" == 1 ]]; then
  # The first two CPUs this process may run on (taskset, cpusets), not CPUs 0 and 1 by number.
  read -r SERVER_CPU WRK_CPU _ < <(allowed_cpus)
  [[ -n "$WRK_CPU" ]] || die "PIN=1 needs two CPUs; this process may use only CPU $SERVER_CPU"
  FERRY_PREFIX=(taskset -c "$SERVER_CPU")
  WRK_PREFIX=(taskset -c "$WRK_CPU")
fi
[[ "$BOOT_MS" == auto || ("$BOOT_MS" =~ ^[0-9]+$ && "$BOOT_MS" -ge 10) ]] ||
  die "BOOT_MS must be auto or a whole number of milliseconds, at least 10 (got '$BOOT_MS')"
build_ferry
mkdir -p "$RESULTS_DIR"

start_ferry base "$HELLO_PHP" "$FERRY"
declare -A LABEL=(
  [aa]="A/A: a second max_jobs: 0 server (what the method reads for no difference)"
  [never]="max_jobs: 1000000000, never reached"
  [maxjobs]="max_jobs: $MAX_JOBS"
  [normal]="max_jobs: $MAX_JOBS, recycle_priority: normal"
  [boot]="max_jobs: 0 while PHP boots and ends outside ferry, under SCHED_IDLE (last column: boots per second)"
  [bootnormal]="max_jobs: 0 while PHP boots and ends outside ferry, at normal priority (last column: boots per second)"
  [fork0]="max_jobs: 0, fork: true (forked workers that never recycle)"
  [fork]="max_jobs: $MAX_JOBS, fork: true"
  [forkfull]="max_jobs: $MAX_JOBS, fork: true, fork_fast_exit: false"
  [forkext]="max_jobs: 0 while a PHP process outside ferry forks $FORKS time(s) per round, the children ending $([[ $FORK_LIFE_MS == 0 ]] && echo "at once" || echo "after $FORK_LIFE_MS ms") (last column: rounds per second)"
  [reexec]="max_jobs: 0, each worker re-execs itself in place every $MAX_JOBS requests (bench/php/hello_reexec.php)"
)
IFS=',' read -r -a SELECTED <<<"$PAIRS"
if [[ "$BOOT_MS" == auto && ",$PAIRS," == *,forkext,* && ",$PAIRS," != *,fork,*forkext,* ]]; then
  die "forkext forks at the fork pair's recycle rate (BOOT_MS=auto): put fork before forkext in PAIRS, or set BOOT_MS"
fi
start_target() {  # pair -> its server, started
  local p=$1
  case "$p" in
    aa | boot | bootnormal | forkext) start_ferry "$p" "$HELLO_PHP" "$FERRY" ;;
    never) start_ferry never "$HELLO_PHP" "$FERRY" "    max_jobs: 1000000000" ;;
    maxjobs) start_ferry maxjobs "$HELLO_PHP" "$FERRY" "    max_jobs: $MAX_JOBS" ;;
    normal) start_ferry normal "$HELLO_PHP" "$FERRY" "    max_jobs: $MAX_JOBS
    recycle_priority: normal" ;;
    fork0) start_ferry fork0 "$HELLO_PHP" "$FERRY" "    fork: true" ;;
    fork) start_ferry fork "$HELLO_PHP" "$FERRY" "    max_jobs: $MAX_JOBS
    fork: true" ;;
    forkfull) start_ferry forkfull "$HELLO_PHP" "$FERRY" "    max_jobs: $MAX_JOBS
    fork: true
    fork_fast_exit: false" ;;
    reexec)
      [[ "$WORKER" == hello ]] || die "the reexec pair runs bench/php/hello_reexec.php: WORKER=hello only"
      start_ferry reexec "$ROOT/bench/php/hello_reexec.php $MAX_JOBS" "$FERRY" ;;
    *) die "unknown pair '$p' (known: aa,never,maxjobs,normal,boot,bootnormal,fork0,fork,forkfull,forkext,reexec)" ;;
  esac
}
for p in "${SELECTED[@]}"; do start_target "$p"; done

ready_count() {  # target -> new PHP images so far: workers that became ready (reexec: images started in place)
  if [[ "$1" == reexec ]]; then grep -c 'ferry bench: re-exec at' "${LOGS[$1]}" || true
  else grep -c ' ready (' "${LOGS[$1]}" || true; fi
}
declare -A RATIOS=() READY0=() READY_BEFORE=() SECS=() BOOTS=()
readies() {  # target -> workers that became ready since the first round began (servers restarted included)
  echo $((READY_BEFORE[$1] + $(ready_count "$1") - READY0[$1]))
}
restart_all() {  # RESTART=1: every server stopped (ferry ends its workers first) and started anew, warmed up
  local t
  for t in base "${SELECTED[@]}"; do
    [[ "$t" == base ]] || READY_BEFORE[$t]=$(readies "$t")
    stop_server "${SERVER_PIDS[$t]}"
  done
  start_ferry base "$HELLO_PHP" "$FERRY"
  for t in "${SELECTED[@]}"; do start_target "$t"; done
  for t in base "${SELECTED[@]}"; do
    wrk -t2 -c64 -d1s "${URL[$t]}" >/dev/null
    [[ "$t" == base ]] || READY0[$t]=$(ready_count "$t")
  done
}

# The external boots: the workers' own command line with stdin closed, started every $1 seconds whether or
# not the one before has ended; the first at a random point of the first period, so that a run gets
# DURATION / period boots on average (a fixed first delay gets the floor of it: 3 in 2 s at 0.58 s, not 3.4);
# each start is a line in $BOOTS_FILE.
BOOTS_FILE="$TMP/boots"
: >"$BOOTS_FILE"
boot_period() {  # pair whose recycle rate it follows -> seconds between two external boots (or fork rounds)
  local n=0 src=$1
  if [[ "$BOOT_MS" != auto ]]; then awk -v ms="$BOOT_MS" 'BEGIN { printf "%.3f", ms / 1000 }'; return; fi
  [[ -n "${SECS[$src]:-}" ]] && n=$(readies "$src")
  if ((n > 0)); then awk -v n="$n" -v s="${SECS[$src]}" 'BEGIN { printf "%.3f", s / n }'; else echo 0.5; fi
}
booter() {  # period idle|normal
  local prio=()
  [[ "$2" == idle ]] && prio=(chrt --idle 0)
  sleep "$(awk -v p="$1" -v r="$RANDOM" 'BEGIN { printf "%.3f", p * r / 32768 }')"
  while :; do
    "${FERRY_PREFIX[@]}" "${prio[@]}" php "${PHP_OPCACHE[@]}" "$HELLO_PHP" </dev/null >/dev/null 2>&1 &
    echo >>"$BOOTS_FILE"
    sleep "$1"
  done
}
rps() {  # target -> req/s of one wrk run (with the external boots running during it for the boot pairs)
  local booter_pid="" out
  case "$1" in
    boot) booter "$(boot_period maxjobs)" idle </dev/null >/dev/null 2>&1 & booter_pid=$! ;;
    bootnormal) booter "$(boot_period maxjobs)" normal </dev/null >/dev/null 2>&1 & booter_pid=$! ;;
    forkext)
      # The forker boots (a PHP start-up, ~50 ms of CPU) before the run begins, not during it.
      rm -f "$TMP/forker.ready"
      "${FERRY_PREFIX[@]}" php "${PHP_OPCACHE[@]}" "$ROOT/bench/php/forker.php" "$(boot_period fork)" "$FORKS" \
        "$TMP/forker.ready" "$FORK_LIFE_MS" </dev/null >>"$BOOTS_FILE" 2>>"$TMP/forker.err" &
      booter_pid=$!
      for ((i = 0; i < 200; i++)); do
        [[ -e "$TMP/forker.ready" ]] && break
        kill -0 "$booter_pid" 2>/dev/null || die "forker.php ended before it was ready: $(tail -n3 "$TMP/forker.err")"
        sleep 0.05
      done
      [[ -e "$TMP/forker.ready" ]] || die "forker.php not ready within 10 s" ;;
  esac
  out=$("${WRK_PREFIX[@]}" wrk -t2 -c64 -d"${DURATION}s" "${URL[$1]}")
  if [[ -n "$booter_pid" ]]; then kill "$booter_pid"; wait "$booter_pid" 2>/dev/null || true; fi
  awk '/^Requests\/sec/ { print $2 }' <<<"$out"
}

# The external boot itself, measured once: the median CPU (user + system) of 20 boots one after the other.
BOOT_CPU_MS=$(python3 "$ROOT/bench/boot_cost.py" --runs 20 --one php "${PHP_OPCACHE[@]}" "$HELLO_PHP")

for t in base "${SELECTED[@]}"; do wrk -t2 -c64 -d2s "${URL[$t]}" >/dev/null; done  # warm-up
for p in "${SELECTED[@]}"; do READY0[$p]=$(ready_count "$p"); READY_BEFORE[$p]=0; SECS[$p]=0; BOOTS[$p]=0; done
for ((r = 1; r <= ROUNDS; r++)); do
  if [[ "$RESTART" == 1 ]] && ((r > 1)); then restart_all; fi
  for p in "${SELECTED[@]}"; do
    a1=$(rps base)
    boots0=$(wc -l <"$BOOTS_FILE")
    b1=$(rps "$p"); b2=$(rps "$p")
    BOOTS[$p]=$((BOOTS[$p] + $(wc -l <"$BOOTS_FILE") - boots0))
    a2=$(rps base)
    RATIOS[$p]+="$(awk -v a1="$a1" -v a2="$a2" -v b1="$b1" -v b2="$b2" 'BEGIN { printf "%.4f", (b1 + b2) / (a1 + a2) }') "
    SECS[$p]=$((SECS[$p] + 2 * DURATION))
  done
  log "round $r of $ROUNDS done"
done

median_line() {  # "r1 r2 ..." -> "median× | low–high | cost"
  python3 - "$1" <<'PY'
import random, statistics, sys
r = [float(x) for x in sys.argv[1].split()]
random.seed(9)
boot = sorted(statistics.median(random.choices(r, k=len(r))) for _ in range(4000))
m = statistics.median(r)
print("%.3f× | %.3f–%.3f | %+.1f %%" % (m, boot[100], boot[3899], (m - 1) * 100))
PY
}
table="| target (against max_jobs: 0, same run) | median ratio | 95 % interval (bootstrap) | cost | recycles per second |
|---|---:|---:|---:|---:|"
for p in "${SELECTED[@]}"; do
  case "$p" in
    boot | bootnormal | forkext) n=${BOOTS[$p]} ;;
    *) n=$(readies "$p") ;;
  esac
  table+="
| ${LABEL[$p]} | $(median_line "${RATIOS[$p]}") | $(awk -v n="$n" -v s="${SECS[$p]}" 'BEGIN { printf "%.2f", n / s }') |"
done
# Ferry's recycling against the same boots without ferry: per round, maxjobs's ratio over boot's (both
# against the same base server in the same round).
for pair in maxjobs:boot normal:bootnormal fork:forkext; do
  a=${pair%%:*} b=${pair##*:}
  [[ -n "${RATIOS[$a]:-}" && -n "${RATIOS[$b]:-}" ]] || continue
  quot=$(paste -d' ' <(tr ' ' '\n' <<<"${RATIOS[$a]% }") <(tr ' ' '\n' <<<"${RATIOS[$b]% }") |
    awk '{ printf "%.4f ", $1 / $2 }')
  table+="
| ${LABEL[$a]}, over the $b pair's $([[ $b == forkext ]] && echo "forks (what ferry adds to the forks)" || echo "boots (what ferry adds to PHP's boot)") | $(median_line "$quot") | |"
done
raw=""
for p in "${SELECTED[@]}"; do raw+="$p: ${RATIOS[$p]% }; "; done
notes="- each round: base, target, target, base (ABBA), wrk -t2 -c64 -d${DURATION}s each; the round's ratio is the
  target's two runs over base's two; recycles per second counts the workers that became ready during the
  target's runs (a worker stopped at max_jobs is replaced by one), and for the boot pairs the external boots
  started during them
- per-round ratios: ${raw%; }"
publish_report "$REPORT" "Ferry recycling benchmark" "per-round ratios in the notes" <<EOF2
- ferry: $("$FERRY" --version), git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown); $WORKERS workers, ${HELLO_PHP#"$ROOT"/}${APP_NOTE:+ loading a generated app of $APP_CLASSES classes at boot}, php ${PHP_OPCACHE[*]}
- servers: $([[ "$RESTART" == 1 ]] && echo "RESTART=1: every server started anew before each round after the first (warmed up for 1 s)" || echo "the same for the whole run (RESTART=0)")
- event loops: $(sed -n 's/.* with [0-9]* worker(s) and \([0-9]*\) event loop(s).*/\1/p' "${LOGS[base]}" | head -n1)$([[ -n "$IO_THREADS" ]] && echo " (IO_THREADS=$IO_THREADS)" || echo " (ferry's default)")
- placement: $([[ "$PIN" == 1 ]] && echo "PIN=1: servers, their workers and the external boots on CPU $SERVER_CPU, wrk on CPU $WRK_CPU" || echo "PIN=0: no taskset")
- http.pool.cpu_affinity auto here: $(grep -qs 'workers pinned one per CPU' "${LOGS[base]}" && echo "each worker pinned to one CPU once booted" || echo "workers not pinned")
- recycle_priority auto here: $(if grep -qs 'workers pinned one per CPU' "${LOGS[base]}"; then echo "normal (workers pinned)"; elif grep -qs 'replacements boot at normal priority' "${LOGS[base]}"; then echo "normal (ferry may not restore a worker's priority)"; else echo "idle (SCHED_IDLE boots and exits)"; fi)
- one PHP boot and end outside ferry (the boot pairs' command, stdin closed): $BOOT_CPU_MS ms of CPU (user + system, median of 20 in a row, idle machine; bench/boot_cost.py)
EOF2
