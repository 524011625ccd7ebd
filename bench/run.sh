#!/usr/bin/env bash
# Hello-world HTTP benchmark: Ferry (plain API and PSR-7, and optionally an earlier Ferry binary) against
# nginx + php-fpm and `php -S`, in one run on one machine, so that only the ratios are compared.
# See bench/README.md.
#
# Knobs (environment):
#   DURATION   seconds per measured wrk run (default 5)
#   ROUNDS     interleaved rounds of (c1, c64, c256) runs per target; the table shows medians (default 3)
#   WORKERS    PHP workers: Ferry num_workers and php-fpm pm.max_children (default 2)
#   TARGETS    comma-separated subset of: ferry,ferry-unpinned,ferry-loops,ferry-before,ferry-maxjobs,ferry-fork,ferry-supervised,ferry-psr7,fpm,php-s
#              (ferry-unpinned: ferry with http.pool.cpu_affinity: off, its workers wherever the scheduler puts them)
#              (ferry-supervised: ferry with every supervisor limit set, none reached, and /metrics on)
#              (default: ferry,ferry-unpinned,ferry-loops,ferry-maxjobs,ferry-fork,ferry-psr7,fpm,php-s, plus ferry-before when
#              FERRY_BEFORE_BIN is set)
#   IO_THREADS http.io_threads of targets ferry, ferry-maxjobs and ferry-psr7 (default 1)
#   LOOPS      http.io_threads of target ferry-loops (default 2)
#   MAX_JOBS   http.pool.max_jobs of targets ferry-maxjobs and ferry-fork (default 10000): what recycling
#              costs; ferry-fork also has http.pool.fork: true (workers forked from a template)
#   REPORT     the report's file name under bench/results (default latest.md)
#   FERRY_BIN  use this ferry binary instead of building build/ferry
#   RESTART_FERRY  1 = restart the Ferry servers every round in that round's order (default: 1 when
#              ferry-before is a target, to compare two binaries without a start-order bias)
#   FERRY_BEFORE_BIN  the ferry binary of target ferry-before ("before a change"; e.g. build-before/ferry)
#   A binary given by path is labelled with its git revision: its own name when that is one (bins/cdf074c),
#   else a file <binary>.rev, else a file REV next to it; "?" when none says.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
WORKERS=${WORKERS:-2}
IO_THREADS=${IO_THREADS:-1}
LOOPS=${LOOPS:-2}
FERRY_BEFORE_BIN=${FERRY_BEFORE_BIN:-}
TARGETS=${TARGETS:-ferry,ferry-unpinned,ferry-loops,${FERRY_BEFORE_BIN:+ferry-before,}ferry-maxjobs,ferry-fork,ferry-psr7,fpm,php-s}
MAX_JOBS=${MAX_JOBS:-10000}
REPORT=${REPORT:-latest.md}
[[ "$REPORT" =~ ^[A-Za-z0-9._-]+\.md$ ]] || { echo "REPORT must be a file name ending in .md" >&2; exit 1; }
case ",$TARGETS," in *,ferry-before,*) RESTART_FERRY=${RESTART_FERRY:-1} ;; *) RESTART_FERRY=${RESTART_FERRY:-0} ;; esac
RESULTS_DIR="$ROOT/bench/results"
CMDLINE="${REPORT:+REPORT=$REPORT }DURATION=$DURATION ROUNDS=$ROUNDS WORKERS=$WORKERS IO_THREADS=$IO_THREADS LOOPS=$LOOPS MAX_JOBS=$MAX_JOBS TARGETS=$TARGETS${FERRY_BIN:+ FERRY_BIN=$FERRY_BIN}${FERRY_BEFORE_BIN:+ FERRY_BEFORE_BIN=$FERRY_BEFORE_BIN} bench/run.sh"

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
bench_prepare wrk curl php awk getconf
[[ "$DURATION" =~ ^[0-9]+$ && "$DURATION" -ge 1 ]] || die "DURATION must be a positive integer"
[[ "$ROUNDS" =~ ^[0-9]+$ && "$ROUNDS" -ge 1 ]] || die "ROUNDS must be a positive integer"
[[ "$WORKERS" =~ ^[0-9]+$ && "$WORKERS" -ge 1 ]] || die "WORKERS must be a positive integer"

declare -A WANT=()
IFS=',' read -r -a _t <<<"$TARGETS"
for t in "${_t[@]}"; do
  t=${t// /}
  case "$t" in
    ferry|ferry-unpinned|ferry-loops|ferry-before|ferry-maxjobs|ferry-fork|ferry-supervised|ferry-psr7|fpm|php-s) WANT[$t]=1 ;;
    "") ;;
    *) die "unknown target '$t' (known: ferry,ferry-unpinned,ferry-loops,ferry-before,ferry-maxjobs,ferry-fork,ferry-supervised,ferry-psr7,fpm,php-s)" ;;
  esac
done
ORDER=()
for t in ferry ferry-unpinned ferry-loops ferry-before ferry-maxjobs ferry-fork ferry-supervised ferry-psr7 fpm php-s; do [[ -n "${WANT[$t]:-}" ]] && ORDER+=("$t"); done
[[ ${#ORDER[@]} -gt 0 ]] || die "TARGETS selects nothing"

if [[ -n "${WANT[fpm]:-}" ]]; then
  command -v nginx >/dev/null 2>&1 || die "nginx not found (run scripts/setup.sh)"
  command -v php-fpm8.2 >/dev/null 2>&1 || die "php-fpm8.2 not found (run scripts/setup.sh)"
fi

# ---------------------------------------------------------------- targets
if [[ -n "${WANT[ferry]:-}${WANT[ferry-unpinned]:-}${WANT[ferry-loops]:-}${WANT[ferry-maxjobs]:-}${WANT[ferry-fork]:-}${WANT[ferry-supervised]:-}${WANT[ferry-psr7]:-}" ]]; then build_ferry; fi
[[ "$MAX_JOBS" =~ ^[0-9]+$ && "$MAX_JOBS" -ge 1 ]] || die "MAX_JOBS must be a positive integer"
[[ "$IO_THREADS" =~ ^[0-9]+$ && "$IO_THREADS" -ge 1 ]] || die "IO_THREADS must be a positive integer"
[[ "$LOOPS" =~ ^[0-9]+$ && "$LOOPS" -ge 1 ]] || die "LOOPS must be a positive integer"

start_ferry_target() {  # a ferry target's server, as every round starts it
  case "$1" in
    ferry) start_ferry ferry "$ROOT/tests/php/hello.php" "$FERRY" "" "  io_threads: $IO_THREADS" ;;
    ferry-unpinned)
      start_ferry ferry-unpinned "$ROOT/tests/php/hello.php" "$FERRY" "    cpu_affinity: off" "  io_threads: $IO_THREADS"
      ;;
    ferry-loops) start_ferry ferry-loops "$ROOT/tests/php/hello.php" "$FERRY" "" "  io_threads: $LOOPS" ;;
    # the same worker and configuration as target ferry (io_threads too: the default is one loop per core)
    ferry-before) start_ferry ferry-before "$ROOT/tests/php/hello.php" "$FERRY_BEFORE_BIN" "" "  io_threads: $IO_THREADS" ;;
    ferry-maxjobs)
      start_ferry ferry-maxjobs "$ROOT/tests/php/hello.php" "$FERRY" "    max_jobs: $MAX_JOBS" "  io_threads: $IO_THREADS"
      ;;
    ferry-fork)
      start_ferry ferry-fork "$ROOT/tests/php/hello.php" "$FERRY" "    max_jobs: $MAX_JOBS
    fork: true" "  io_threads: $IO_THREADS"
      ;;
    ferry-supervised) # every limit checked on every tick and after requests, none reached; /metrics counting
      start_ferry ferry-supervised "$ROOT/tests/php/hello.php" "$FERRY" "    supervisor:
      watch_tick: 1s
      ttl: 1h
      idle_ttl: 1h
      max_worker_memory: 512
      exec_ttl: 60s" "  io_threads: $IO_THREADS" "metrics:
  address: 127.0.0.1:0"
      ;;
    ferry-psr7) start_ferry ferry-psr7 "$ROOT/tests/php/psr7_hello.php" "$FERRY" "" "  io_threads: $IO_THREADS" ;;
  esac
}

# The git revision a binary given by path was built from (see FERRY_BEFORE_BIN above).
rev_of() {
  local bin=$1 name
  name=$(basename "$bin")
  if [[ "$name" =~ ^[0-9a-f]{7,40}$ ]]; then echo "$name"
  elif [[ -f "$bin.rev" ]]; then head -n1 "$bin.rev" | tr -cd '[:alnum:]._+-'
  elif [[ -f "$(dirname "$bin")/REV" ]]; then head -n1 "$(dirname "$bin")/REV" | tr -cd '[:alnum:]._+-'
  else echo "?"
  fi
}

# ferry-before: another ferry binary (e.g. the build before a change), same worker and config as `ferry`.
BEFORE_REV=""
if [[ -n "${WANT[ferry-before]:-}" ]]; then
  [[ -n "$FERRY_BEFORE_BIN" ]] || die "target ferry-before needs FERRY_BEFORE_BIN=/path/to/ferry"
  [[ -x "$FERRY_BEFORE_BIN" && ! -d "$FERRY_BEFORE_BIN" ]] || die "FERRY_BEFORE_BIN=$FERRY_BEFORE_BIN is not an executable"
  FERRY_BEFORE_BIN=$(cd "$(dirname "$FERRY_BEFORE_BIN")" && pwd)/$(basename "$FERRY_BEFORE_BIN")
  BEFORE_REV=$(rev_of "$FERRY_BEFORE_BIN")
fi

mkdir -p "$TMP/www"
printf '<?php\necho "Hello, World!";\n' >"$TMP/www/index.php"

for t in "${ORDER[@]}"; do
  log "starting $t"
  case "$t" in
    ferry*) start_ferry_target "$t" ;;
    fpm) start_fpm ;;
    php-s) start_phps ;;
  esac
done
log "all targets answer \"$HELLO\"; benchmarking ${ORDER[*]} (${DURATION}s per run)"

# ---------------------------------------------------------------- measuring


declare -A R1 P1 R64 P64 R256 P256 CPU_S CPU_P NOTES
mkdir -p "$RESULTS_DIR/raw"


for t in "${ORDER[@]}"; do
  log "$t: warm-up"
  wrk -t1 -c4 -d2s "${URL[$t]}" >"$RESULTS_DIR/raw/$t-warmup.txt" 2>&1 || die "wrk failed on $t"
  NOTES[$t]=""
done

# Rounds interleave the targets so that a noisy neighbour or a slow minute hits all of them alike;
# the table shows each figure's median over the rounds.
declare -A RR1 PP1 RR64 PP64 RR256 PP256 CS CP
for ((r = 1; r <= ROUNDS; r++)); do
  # Odd rounds run the targets in order, even rounds in reverse: a target's place in a round biases it
  # (measured: the same binary moved from first to second gained ~8 % at c64), so every target gets
  # every place equally often when ROUNDS is even.
  round_order=("${ORDER[@]}")
  if ((r % 2 == 0)); then
    round_order=()
    for ((i = ${#ORDER[@]} - 1; i >= 0; i--)); do round_order+=("${ORDER[$i]}"); done
  fi
  if [[ "$RESTART_FERRY" == 1 ]]; then
    # The order in which servers start biases them too (measured: the first-started of two identical
    # binaries ran up to 8 % slower at c64 for the whole run): the Ferry servers are restarted every round,
    # in the round's order, so that the comparison with ferry-before is even.
    for t in "${round_order[@]}"; do
      case "$t" in
        ferry*) stop_server "${SERVER_PIDS[$t]}" ;;
      esac
    done
    for t in "${round_order[@]}"; do
      case "$t" in
        ferry*) start_ferry_target "$t" ;;
        *) continue ;;
      esac
      wrk -t1 -c4 -d1s "${URL[$t]}" >/dev/null 2>&1 || die "wrk failed on $t"
    done
  fi
  for t in "${round_order[@]}"; do
    url=${URL[$t]}
    log "round $r/$ROUNDS, $t: wrk -t1 -c1 -d${DURATION}s"
    wrk -t1 -c1 -d"${DURATION}s" --latency "$url" >"$RESULTS_DIR/raw/$t-c1-r$r.txt" 2>&1 || die "wrk failed on $t"
    parse_wrk "$RESULTS_DIR/raw/$t-c1-r$r.txt"
    RR1[$t]+="$W_RPS "; PP1[$t]+="$W_P99 "; NOTES[$t]+=${W_ERR:+round $r c1 $W_ERR}

    log "round $r/$ROUNDS, $t: wrk -t2 -c64 -d${DURATION}s"
    s0=$(server_ticks "$t"); p0=$(php_ticks "$t")
    wrk -t2 -c64 -d"${DURATION}s" --latency "$url" >"$RESULTS_DIR/raw/$t-c64-r$r.txt" 2>&1 || die "wrk failed on $t"
    s1=$(server_ticks "$t"); p1=$(php_ticks "$t")
    parse_wrk "$RESULTS_DIR/raw/$t-c64-r$r.txt"
    RR64[$t]+="$W_RPS "; PP64[$t]+="$W_P99 "; NOTES[$t]+=${W_ERR:+round $r c64 $W_ERR}
    CS[$t]+="$(per_request_us $((s1 - s0)) "$W_REQS") "; CP[$t]+="$(per_request_us $((p1 - p0)) "$W_REQS") "

    log "round $r/$ROUNDS, $t: wrk -t2 -c256 -d${DURATION}s"
    wrk -t2 -c256 -d"${DURATION}s" --latency "$url" >"$RESULTS_DIR/raw/$t-c256-r$r.txt" 2>&1 || die "wrk failed on $t"
    parse_wrk "$RESULTS_DIR/raw/$t-c256-r$r.txt"
    RR256[$t]+="$W_RPS "; PP256[$t]+="$W_P99 "; NOTES[$t]+=${W_ERR:+round $r c256 $W_ERR}
  done
done
for t in "${ORDER[@]}"; do
  # shellcheck disable=SC2086 # word splitting of the per-round lists is intended
  { R1[$t]=$(median ${RR1[$t]}); P1[$t]=$(median ${PP1[$t]}); R64[$t]=$(median ${RR64[$t]});
    P64[$t]=$(median ${PP64[$t]}); R256[$t]=$(median ${RR256[$t]}); P256[$t]=$(median ${PP256[$t]});
    CPU_S[$t]=$(median ${CS[$t]}); CPU_P[$t]=$(median ${CP[$t]}); }
  [[ -z "${SERVER_PIDS[$t]}" ]] && CPU_S[$t]="—"
done

# ---------------------------------------------------------------- report
label() {
  case "$1" in
    ferry) echo "Ferry, plain API (hello.php), $IO_THREADS loop(s)" ;;
    ferry-unpinned) echo "Ferry, plain API, $IO_THREADS loop(s), cpu_affinity: off" ;;
    ferry-loops) echo "Ferry, plain API (hello.php), $LOOPS loops" ;;
    ferry-before) echo "Ferry before${BEFORE_REV:+ ($BEFORE_REV)}, plain API (hello.php)" ;;
    ferry-maxjobs) echo "Ferry, plain API, $IO_THREADS loop(s), max_jobs: $MAX_JOBS" ;;
    ferry-fork) echo "Ferry, plain API, $IO_THREADS loop(s), max_jobs: $MAX_JOBS, fork: true" ;;
    ferry-supervised) echo "Ferry, plain API, $IO_THREADS loop(s), supervisor limits + /metrics on" ;;
    ferry-psr7) echo "Ferry, PSR-7 (psr7_hello.php)" ;;
    fpm) echo "nginx + php-fpm (static $WORKERS)" ;;
    php-s) echo "php -S (1 process)" ;;
  esac
}

vs_before() {  # a b -> "1.012× (+1.2 %)": ferry's median over ferry-before's; below 1 is a regression
  awk -v a="$1" -v b="$2" 'BEGIN {
    if (b <= 0) { print "n/a"; exit }
    r = a / b; d = (r - 1) * 100
    printf "%.3f× (%s%.1f %%)", r, (d >= 0 ? "+" : "−"), (d >= 0 ? d : -d) }'
}

paired() {  # "a1 a2 ..." "b1 b2 ..." -> the median of the per-round ratios a_i / b_i, as vs_before shows it
  local r
  r=$(awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x, " "); split(b, y, " ")
        for (i = 1; i <= n; i++) if (y[i] > 0) print x[i] / y[i] }' | sort -g |
      awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
  [[ -n "$r" ]] || { echo "n/a"; return; }
  vs_before "$r" 1
}

table=$(
  head="| target | c1 req/s | c1 p99 | c64 req/s | c64 p99 | c256 req/s | c256 p99 | ratio to nginx+php-fpm at c64 | CPU µs/req at c64 (server / PHP) | front-end ceiling (req/s per server core) |"
  rule="|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  if [[ -n "${WANT[ferry-before]:-}" ]]; then
    head+=" ferry ÷ ferry-before (c1 / c64) | same, median of per-round ratios (c1 / c64) |"; rule+="---:|---:|"
  fi
  echo "$head"; echo "$rule"
  for t in "${ORDER[@]}"; do
    if [[ -n "${R64[fpm]:-}" ]]; then
      ratio=$(awk -v a="${R64[$t]}" -v b="${R64[fpm]}" 'BEGIN { printf "%.2f×", a / b }')
    else
      ratio="n/a"
    fi
    ceiling=$(awk -v us="${CPU_S[$t]}" 'BEGIN { if (us + 0 > 0) printf "%.0fk", 1000 / us; else print "—" }')
    printf '| %s | %s | %s ms | %s | %s ms | %s | %s ms | %s | %s / %s | %s |' "$(label "$t")" "${R1[$t]}" \
      "${P1[$t]}" "${R64[$t]}" "${P64[$t]}" "${R256[$t]}" "${P256[$t]}" "$ratio" "${CPU_S[$t]}" "${CPU_P[$t]}" \
      "$ceiling"
    if [[ -n "${WANT[ferry-before]:-}" ]]; then
      if [[ "$t" == ferry-before && -n "${R1[ferry]:-}" ]]; then
        printf ' %s / %s |' "$(vs_before "${R1[ferry]}" "${R1[$t]}")" "$(vs_before "${R64[ferry]}" "${R64[$t]}")"
        printf ' %s / %s |' "$(paired "${RR1[ferry]}" "${RR1[$t]}")" "$(paired "${RR64[ferry]}" "${RR64[$t]}")"
      elif [[ "$t" == ferry-before ]]; then
        printf ' n/a (no ferry target) | n/a |'
      else
        printf ' — | — |'
      fi
    fi
    printf '\n'
  done
)

notes=$(
  if [[ -n "${WANT[ferry-maxjobs]:-}" && -n "${WANT[ferry]:-}" ]]; then
    echo "- recycling: ferry-maxjobs ÷ ferry = $(vs_before "${R64[ferry-maxjobs]}" "${R64[ferry]}") at c64 (median of per-round ratios $(paired "${RR64[ferry-maxjobs]}" "${RR64[ferry]}")), $(vs_before "${R1[ferry-maxjobs]}" "${R1[ferry]}") at c1"
  fi
  if [[ -n "${WANT[ferry-fork]:-}" && -n "${WANT[ferry]:-}" ]]; then
    echo "- recycling with fork: ferry-fork ÷ ferry = $(vs_before "${R64[ferry-fork]}" "${R64[ferry]}") at c64 (median of per-round ratios $(paired "${RR64[ferry-fork]}" "${RR64[ferry]}")), $(vs_before "${R1[ferry-fork]}" "${R1[ferry]}") at c1; recycled workers: $(grep -c ' ready (' "${LOGS[ferry-fork]}" || true) started in the log"
  fi
  if [[ -n "${WANT[ferry-unpinned]:-}" && -n "${WANT[ferry]:-}" ]]; then
    echo "- pinned workers: ferry ÷ ferry-unpinned = $(vs_before "${R1[ferry]}" "${R1[ferry-unpinned]}") at c1, $(vs_before "${R64[ferry]}" "${R64[ferry-unpinned]}") at c64, $(vs_before "${R256[ferry]}" "${R256[ferry-unpinned]}") at c256 (medians of per-round ratios: $(paired "${RR1[ferry]}" "${RR1[ferry-unpinned]}") / $(paired "${RR64[ferry]}" "${RR64[ferry-unpinned]}") / $(paired "${RR256[ferry]}" "${RR256[ferry-unpinned]}"))"
  fi
  if [[ -n "${WANT[ferry-supervised]:-}" && -n "${WANT[ferry]:-}" ]]; then
    echo "- supervision + metrics: ferry-supervised ÷ ferry = $(vs_before "${R1[ferry-supervised]}" "${R1[ferry]}") at c1, $(vs_before "${R64[ferry-supervised]}" "${R64[ferry]}") at c64, $(vs_before "${R256[ferry-supervised]}" "${R256[ferry]}") at c256 (medians of per-round ratios: $(paired "${RR1[ferry-supervised]}" "${RR1[ferry]}") / $(paired "${RR64[ferry-supervised]}" "${RR64[ferry]}") / $(paired "${RR256[ferry-supervised]}" "${RR256[ferry]}")); its recycled workers: $(grep -c 'replacing it' "${LOGS[ferry-supervised]}" || true)"
  fi
  if [[ -n "${WANT[ferry-loops]:-}" && -n "${WANT[ferry]:-}" ]]; then
    echo "- loops: ferry-loops ($LOOPS) ÷ ferry ($IO_THREADS) = $(vs_before "${R1[ferry-loops]}" "${R1[ferry]}") at c1, $(vs_before "${R64[ferry-loops]}" "${R64[ferry]}") at c64, $(vs_before "${R256[ferry-loops]}" "${R256[ferry]}") at c256 (medians of per-round ratios: $(paired "${RR1[ferry-loops]}" "${RR1[ferry]}") / $(paired "${RR64[ferry-loops]}" "${RR64[ferry]}") / $(paired "${RR256[ferry-loops]}" "${RR256[ferry]}"))"
  fi
  for t in "${ORDER[@]}"; do
    [[ -n "${NOTES[$t]}" ]] && echo "- $t: wrk reported ${NOTES[$t]%; }"
    case "$t" in
      ferry*)
        w=$(grep -E ' (WARN|ERROR) ' "${LOGS[$t]}" | head -n 5 || true)
        [[ -n "$w" ]] && printf -- '- %s stderr warnings/errors (first 5):\n    %s\n' "$t" "${w//$'\n'/$'\n    '}"
        ;;
      fpm)
        w=$(grep -hiE 'warn|error|alert|emerg' "$TMP/nginx-fpm/logs/error.log" "$TMP/php-fpm.log" 2>/dev/null | head -n 5 || true)
        [[ -n "$w" ]] && printf -- '- fpm: nginx/php-fpm log warnings (first 5):\n    %s\n' "${w//$'\n'/$'\n    '}"
        ;;
    esac
  done
  true
)

{
  if [[ -n "${FERRY_BIN:-}" ]]; then
    echo "- ferry: $FERRY_BIN (${FERRY:+$("$FERRY" version 2>/dev/null)}), git $(rev_of "$FERRY_BIN")"
  else
    echo "- ferry: ${FERRY:+$("$FERRY" version 2>/dev/null), }git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet 2>/dev/null || echo '+dirty'), build type $(awk -F= '/^CMAKE_BUILD_TYPE:/ { print $2 }' "$ROOT/build/CMakeCache.txt" 2>/dev/null)"
  fi
  if [[ -n "${WANT[ferry-before]:-}" ]]; then
    echo "- ferry-before: $FERRY_BEFORE_BIN ($("$FERRY_BEFORE_BIN" version 2>/dev/null || echo '?')), git $BEFORE_REV; same hello.php and config as ferry"
  fi
  [[ -n "$FERRY_HTTP_EXTRA" ]] && echo "- every Ferry target's config has under \`http:\`: \`$(echo "$FERRY_HTTP_EXTRA" | tr -s ' \n' ' ' | sed 's/^ //')\`"
  echo "- peers: $(nginx -v 2>&1 | sed 's/^nginx version: //'), $(php -r 'echo "PHP ", PHP_VERSION;'), $(wrk -v 2>&1 | head -n1 | awk '{ print $1, $2 }'); opcache on everywhere (-d opcache.enable=1 -d opcache.enable_cli=1, checked in php-fpm)"
  echo "- runs: warm-up wrk -t1 -c4 -d2s per target, then $ROUNDS interleaved rounds (odd rounds in target order, even rounds reversed$([[ "$RESTART_FERRY" == 1 ]] && echo "; Ferry servers restarted every round in that order")) of wrk -t1 -c1, -t2 -c64 and -t2 -c256 -d${DURATION}s (--latency) per target; figures are medians over the rounds"
  echo "- CPU µs/req: utime+stime from /proc during the c64 run ÷ requests completed; server = ferry process (all its loops) / nginx master+worker, PHP = ferry's workers / php-fpm master+children"
  echo "- front-end ceiling: 10⁶ ÷ server CPU µs/req, the requests per second one core of the front end could carry if PHP were free"
} | publish_report "$REPORT" "Ferry hello-world benchmark" "raw wrk output in bench/results/raw/"
