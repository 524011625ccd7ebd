#!/usr/bin/env bash
# The many-core check of issue 9, as one command for a machine with many CPUs: Ferry against nginx +
# php-fpm with the same number of PHP processes, the servers on one set of CPUs and wrk on another (the
# issue's setup on 16 cores: servers on 12, `wrk -t4 -c256` on the other 4), hello world, in interleaved
# rounds. Besides req/s it reads every Ferry thread's CPU time from /proc/PID/task during each run, so
# that the report says whether a front-end thread was pegged while the PHP workers waited. The goals
# (issue 9): Ferry >= 2.5x nginx + php-fpm, and no event loop at ~100 % of a core while PHP has spare time.
# See bench/README.md, "Many cores".
#
# Knobs (environment):
#   SERVER_CPUS   CPUs for the servers and their PHP processes, a taskset list such as 0-11 (default: all
#                 the CPUs this process may use but the last WRK_N)
#   WRK_CPUS      CPUs for wrk (default: the last WRK_N of them; WRK_N is 4 on 8 or more CPUs, else 1)
#   WORKERS       PHP processes of each server: ferry's num_workers, php-fpm's pm.max_children (default:
#                 the number of server CPUs)
#   NGINX_WORKERS nginx worker_processes (default: 4, at most the number of server CPUs)
#   IO_THREADS    ferry's http.io_threads (default: unset, ferry's own default from its CPU affinity)
#   CPU_AFFINITY  ferry's http.pool.cpu_affinity: auto (default: workers pinned one per CPU, and each loop
#                 beside its own workers) or off (loops and workers left to the scheduler): run both to see
#                 which placement this machine prefers
#   CONNS         wrk connections (default 256)
#   DURATION      seconds per wrk run (default 10)
#   ROUNDS        interleaved rounds (default 3); the table shows medians
#   REPORT        report file under bench/results (default manycore.md)
#   FERRY_BIN     use this ferry binary instead of building build/ferry
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-256}
REPORT=${REPORT:-manycore.md}
IO_THREADS=${IO_THREADS:-}
CPU_AFFINITY=${CPU_AFFINITY:-auto}
[[ "$REPORT" =~ ^[A-Za-z0-9._-]+\.md$ ]] || { echo "REPORT must be a file name ending in .md" >&2; exit 1; }
RESULTS_DIR="$ROOT/bench/results"
WORKERS=${WORKERS:-0} # set from the server CPUs below when 0

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
bench_prepare wrk curl php python3 awk taskset getconf nginx php-fpm8.2
for v in DURATION ROUNDS CONNS; do
  [[ "${!v}" =~ ^[0-9]+$ && "${!v}" -ge 1 ]] || die "$v must be a positive integer"
done
[[ "$WORKERS" =~ ^[0-9]+$ ]] || die "WORKERS must be a positive integer"
[[ -z "$IO_THREADS" || "$IO_THREADS" =~ ^[1-9][0-9]*$ ]] || die "IO_THREADS must be a positive integer or unset"
[[ "$CPU_AFFINITY" == auto || "$CPU_AFFINITY" == off ]] || die "CPU_AFFINITY must be auto or off (got '$CPU_AFFINITY')"

cpus_of() {  # taskset list -> the CPUs in it, space-separated, or nothing if malformed
  python3 - "$1" <<'PY'
import sys
out = []
try:
    for part in sys.argv[1].split(","):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
except ValueError:
    sys.exit(0)
print(*out)
PY
}
read -r -a ALLOWED < <(allowed_cpus)
((${#ALLOWED[@]} >= 2)) || die "needs two CPUs at least (this process may use ${#ALLOWED[@]})"
WRK_N=1
((${#ALLOWED[@]} >= 8)) && WRK_N=4
if [[ -z "${SERVER_CPUS:-}" ]]; then
  SERVER_CPUS=$(IFS=,; echo "${ALLOWED[*]:0:${#ALLOWED[@]}-WRK_N}")
fi
if [[ -z "${WRK_CPUS:-}" ]]; then
  WRK_CPUS=$(IFS=,; echo "${ALLOWED[*]: -WRK_N}")
fi
read -r -a SERVER_SET <<<"$(cpus_of "$SERVER_CPUS")"
read -r -a WRK_SET <<<"$(cpus_of "$WRK_CPUS")"
((${#SERVER_SET[@]} > 0)) || die "SERVER_CPUS='$SERVER_CPUS' is not a CPU list like 0-11 or 0,2,4"
((${#WRK_SET[@]} > 0)) || die "WRK_CPUS='$WRK_CPUS' is not a CPU list like 12-15"
for c in "${SERVER_SET[@]}" "${WRK_SET[@]}"; do
  [[ " ${ALLOWED[*]} " == *" $c "* ]] || die "CPU $c is not one this process may use (${ALLOWED[*]})"
done
for c in "${SERVER_SET[@]}"; do
  [[ " ${WRK_SET[*]} " != *" $c "* ]] || die "CPU $c is in both SERVER_CPUS and WRK_CPUS"
done
((WORKERS > 0)) || WORKERS=${#SERVER_SET[@]}
NGINX_WORKERS=${NGINX_WORKERS:-$((${#SERVER_SET[@]} < 4 ? ${#SERVER_SET[@]} : 4))}
[[ "$NGINX_WORKERS" =~ ^[1-9][0-9]*$ ]] || die "NGINX_WORKERS must be a positive integer"
WRK_THREADS=${#WRK_SET[@]}
((CONNS >= WRK_THREADS)) || die "CONNS ($CONNS) must be at least wrk's threads, one per wrk CPU ($WRK_THREADS)"
CMDLINE="SERVER_CPUS=$SERVER_CPUS WRK_CPUS=$WRK_CPUS WORKERS=$WORKERS NGINX_WORKERS=$NGINX_WORKERS${IO_THREADS:+ IO_THREADS=$IO_THREADS} CPU_AFFINITY=$CPU_AFFINITY CONNS=$CONNS DURATION=$DURATION ROUNDS=$ROUNDS bench/manycore.sh"

FERRY_PREFIX=(taskset -c "$SERVER_CPUS")
FPM_PREFIX=(taskset -c "$SERVER_CPUS")
WRK=(taskset -c "$WRK_CPUS" wrk -t"$WRK_THREADS" -c"$CONNS" --latency)
build_ferry
mkdir -p "$RESULTS_DIR"
printf '<?php\necho "Hello, World!";\n' >"$TMP/www/index.php"

log "servers on CPUs $SERVER_CPUS, wrk on $WRK_CPUS; $WORKERS PHP processes each, nginx $NGINX_WORKERS workers"
start_ferry ferry "$ROOT/tests/php/hello.php" "$FERRY" "    cpu_affinity: $CPU_AFFINITY" "${IO_THREADS:+  io_threads: $IO_THREADS}"
LOOPS_USED=$(sed -n 's/.*worker(s) and \([0-9]*\) event loop(s).*/\1/p' "${LOGS[ferry]}" | head -n1)
WORKER_PROCESSES=$NGINX_WORKERS start_fpm

thread_ticks() {  # pid -> "tid name ticks" per thread
  local f
  for f in /proc/"$1"/task/*/stat; do
    awk '{ s = $0; name = s; sub(/^[0-9]+ \(/, "", name); sub(/\) .*/, "", name); sub(/.*\) /, "", s);
           split(s, a, " "); split(FILENAME, p, "/"); print p[5], name, a[12] + a[13] }' "$f" 2>/dev/null || true
  done
}

declare -A RPS=() P99=() SRV=() PHPC=() LOOPMAX=() LOOPNAME=() ERRS=() WRKC=()
run_one() {  # target round
  local t=$1 out="$TMP/wrk-$1-$2.txt" s0 p0 s1 p1 before after
  [[ "$t" == ferry ]] && before=$(thread_ticks "${SERVER_PIDS[ferry]}")
  s0=$(server_ticks "$t"); p0=$(php_ticks "$t")
  # wrk's own CPU (bash's time: user and system seconds of the child): a client near its CPUs' limit
  # measures itself, not the server.
  local TIMEFORMAT='%U %S'
  { time "${WRK[@]}" -d"${DURATION}s" "${URL[$t]}" >"$out"; } 2>"$TMP/wrk-time"
  s1=$(server_ticks "$t"); p1=$(php_ticks "$t")
  [[ "$t" == ferry ]] && after=$(thread_ticks "${SERVER_PIDS[ferry]}")
  parse_wrk "$out"
  RPS[$t]+="$W_RPS "; P99[$t]+="$W_P99 "
  [[ -n "$W_ERR" ]] && ERRS[$t]+="round $2: $W_ERR"
  # CPU in cores (100 % = one core busy for the whole run)
  SRV[$t]+="$(awk -v d=$((s1 - s0)) -v hz="$CLK_TCK" -v s="$DURATION" 'BEGIN { printf "%.2f", d / hz / s }') "
  PHPC[$t]+="$(awk -v d=$((p1 - p0)) -v hz="$CLK_TCK" -v s="$DURATION" 'BEGIN { printf "%.2f", d / hz / s }') "
  WRKC[$t]+="$(awk -v s="$DURATION" -v n="$WRK_THREADS" '{ printf "%.0f", ($1 + $2) / s / n * 100 }' "$TMP/wrk-time") "
  if [[ "$t" == ferry ]]; then
    local busiest
    busiest=$(awk -v hz="$CLK_TCK" -v s="$DURATION" 'NR == FNR { b[$1] = $3; next }
      ($1 in b) { pct = ($3 - b[$1]) / hz / s * 100; if (pct > best) { best = pct; who = $2 } }
      END { printf "%.0f %s\n", best, who }' <(echo "$before") <(echo "$after"))
    LOOPMAX[ferry]+="${busiest%% *} "
    LOOPNAME[ferry]=${busiest#* }
  fi
}

for t in ferry fpm; do "${WRK[@]}" -d2s "${URL[$t]}" >/dev/null; done  # warm-up
for ((r = 1; r <= ROUNDS; r++)); do
  if ((r % 2)); then order=(ferry fpm); else order=(fpm ferry); fi
  for t in "${order[@]}"; do run_one "$t" "$r"; done
  log "round $r of $ROUNDS done"
done

# shellcheck disable=SC2086  # word splitting of the lists is meant
med() { median $1; }
ratio=$(awk -v a="$(med "${RPS[ferry]}")" -v b="$(med "${RPS[fpm]}")" 'BEGIN { printf "%.2f", a / b }')
php_per_worker() {  # cores -> percent of one core per PHP process
  awk -v c="$1" -v w="$WORKERS" 'BEGIN { printf "%.0f", c / w * 100 }'
}
loop_pct=$(med "${LOOPMAX[ferry]}")
php_pct=$(php_per_worker "$(med "${PHPC[ferry]}")")
pegged=no
((loop_pct >= 95 && php_pct < 90)) && pegged=yes
wrk_pct=$(med "${WRKC[ferry]}")
client_note=""
if ((wrk_pct >= 90)); then
  client_note="; wrk used ${wrk_pct} % of its CPUs against Ferry: the client may be the limit (give it more CPUs, WRK_CPUS)"
fi
table="| target | req/s | p99 | ratio to nginx + php-fpm | server CPU (cores) | PHP CPU (cores) | PHP CPU per process | busiest Ferry thread | wrk CPU (of its CPUs) |
|---|---:|---:|---:|---:|---:|---:|---:|---:|
| Ferry ($WORKERS PHP workers, ${LOOPS_USED:-?} event loops) | $(med "${RPS[ferry]}") | $(med "${P99[ferry]}") ms | ${ratio}× | $(med "${SRV[ferry]}") | $(med "${PHPC[ferry]}") | ${php_pct} % | ${loop_pct} % (${LOOPNAME[ferry]}) | ${wrk_pct} % |
| nginx ($NGINX_WORKERS worker processes) + php-fpm (static, $WORKERS children) | $(med "${RPS[fpm]}") | $(med "${P99[fpm]}") ms | 1.00× | $(med "${SRV[fpm]}") | $(med "${PHPC[fpm]}") | $(php_per_worker "$(med "${PHPC[fpm]}")") % | — | $(med "${WRKC[fpm]}") % |"
notes="- goals (issue 9): Ferry >= 2.5× nginx + php-fpm: $(awk -v r="$ratio" 'BEGIN { print (r >= 2.5) ? "met" : "not met" }') (${ratio}×); a Ferry thread pegged (>= 95 % of a core) while the PHP processes have spare time (< 90 % each): $pegged$client_note
- each round runs both targets (order alternating), \`wrk -t$WRK_THREADS -c$CONNS -d${DURATION}s\` under \`taskset -c $WRK_CPUS\`; medians of $ROUNDS rounds; CPU from /proc (utime + stime) over each run, in cores; the busiest Ferry thread is the one with the most CPU in a run (loop 0 is \`ferry\`, the others \`ferry-loop-N\`)
- per-round req/s: ferry: ${RPS[ferry]% }; fpm: ${RPS[fpm]% }; busiest Ferry thread, % of a core: ${LOOPMAX[ferry]% }${ERRS[ferry]:+
- ferry errors: ${ERRS[ferry]}}${ERRS[fpm]:+
- nginx + php-fpm errors: ${ERRS[fpm]}}"
publish_report "$REPORT" "Ferry many-core check" "per-round figures in the notes" "" "wrk (on its own CPUs)" <<EOF2
- placement: servers and their PHP processes on CPUs $SERVER_CPUS (taskset), wrk on $WRK_CPUS
- ferry: $("$FERRY" --version), git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown); tests/php/hello.php, php ${PHP_OPCACHE[*]}, io_threads ${IO_THREADS:-default} ($LOOPS_USED loops), cpu_affinity $CPU_AFFINITY$(grep -qs 'event loops pinned beside their workers' "${LOGS[ferry]}" && echo ": loops pinned beside their workers" || true)
EOF2
