#!/usr/bin/env bash
# Static files benchmark: Ferry's static handler against nginx (sendfile on, open_file_cache on, as many
# worker processes as Ferry has event loops) serving the same files, in one run on one machine.
# See bench/README.md.
#
# Knobs (environment):
#   DURATION   seconds per wrk run (default 5)
#   ROUNDS     interleaved rounds; the table shows medians (default 5)
#   SIZES      file sizes to serve, comma-separated, with k/m suffixes (default 1k,64k,1m)
#   CONNS      wrk connections (default 64)
#   FERRY_BIN  use this ferry binary instead of building build/ferry
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-5}
SIZES=${SIZES:-1k,64k,1m}
CONNS=${CONNS:-64}
WORKERS=1 # the PHP worker Ferry needs to start; no request reaches it
RESULTS_DIR="$ROOT/bench/results"
CMDLINE="DURATION=$DURATION ROUNDS=$ROUNDS SIZES=$SIZES CONNS=$CONNS bench/static.sh"
LOOPS=1 # Ferry's http.io_threads and nginx's worker_processes, set alike

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
bench_prepare wrk curl php awk nginx sha256sum
for v in DURATION ROUNDS CONNS; do
  [[ "${!v}" =~ ^[0-9]+$ && "${!v}" -ge 1 ]] || die "$v must be a positive integer"
done

# ---------------------------------------------------------------- the files
FILES=()
IFS=',' read -r -a _s <<<"$SIZES"
mkdir -p "$TMP/public"
for s in "${_s[@]}"; do
  [[ "$s" =~ ^([0-9]+)([kKmM]?)$ ]] || die "SIZES: '$s' is not a size like 1k, 64k or 1m"
  n=${BASH_REMATCH[1]}
  case "${BASH_REMATCH[2]}" in k|K) n=$((n * 1024)) ;; m|M) n=$((n * 1024 * 1024)) ;; esac
  head -c "$n" /dev/urandom >"$TMP/public/$s.bin"
  FILES+=("$s")
done

# ---------------------------------------------------------------- targets
ORDER=(ferry nginx)
build_ferry
FERRY_HTTP_EXTRA="  io_threads: $LOOPS
  middleware: [\"static\"]
  static:
    dir: \"$TMP/public\""
start_ferry ferry "$ROOT/tests/php/hello.php" "$FERRY"

port=$(free_port)
WORKER_PROCESSES=$LOOPS NGINX_HTTP_EXTRA="sendfile on;
  tcp_nopush on;
  open_file_cache max=1024 inactive=60s;
  types { application/octet-stream bin; }" start_nginx nginx "$port" "    root $TMP/public;"
URL[nginx]="http://127.0.0.1:$port/"
SERVER_PIDS[nginx]=$NGINX_PID
PHP_PIDS[nginx]=""
PHP_ROOT_IS_CHILDREN[nginx]=0
LOGS[nginx]="$TMP/nginx-nginx/logs/error.log"

# Both must send every file whole and byte for byte before anything is measured.
for t in "${ORDER[@]}"; do
  for f in "${FILES[@]}"; do
    want=$(sha256sum <"$TMP/public/$f.bin")
    got=""
    for ((i = 0; i < 50; i++)); do
      got=$(curl -s --max-time 5 "${URL[$t]}$f.bin" | sha256sum) && [[ "$got" == "$want" ]] && break
      sleep 0.1
    done
    [[ "$got" == "$want" ]] || die "$t does not serve $f.bin correctly"
  done
done
log "both serve ${FILES[*]}; benchmarking (wrk -t2 -c$CONNS, ${DURATION}s, $ROUNDS rounds)"

# ---------------------------------------------------------------- measuring
mkdir -p "$RESULTS_DIR/raw"
declare -A RPS P99 CPU NOTES
for t in "${ORDER[@]}"; do
  wrk -t1 -c4 -d1s "${URL[$t]}${FILES[0]}.bin" >/dev/null 2>&1 || die "wrk failed on $t"
  NOTES[$t]=""
done
for ((r = 1; r <= ROUNDS; r++)); do
  round_order=("${ORDER[@]}")
  ((r % 2 == 0)) && round_order=(nginx ferry)
  for f in "${FILES[@]}"; do
    for t in "${round_order[@]}"; do
      log "round $r/$ROUNDS, $f, $t"
      out="$RESULTS_DIR/raw/static-$t-$f-r$r.txt"
      s0=$(server_ticks "$t")
      wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency "${URL[$t]}$f.bin" >"$out" 2>&1 || die "wrk failed on $t"
      s1=$(server_ticks "$t")
      parse_wrk "$out"
      RPS[$t.$f]+="$W_RPS "; P99[$t.$f]+="$W_P99 "; NOTES[$t]+=${W_ERR:+round $r $f $W_ERR}
      CPU[$t.$f]+="$(per_request_us $((s1 - s0)) "$W_REQS") "
    done
  done
done

# ---------------------------------------------------------------- report
declare -A M
for t in "${ORDER[@]}"; do
  for f in "${FILES[@]}"; do
    # shellcheck disable=SC2086 # word splitting of the per-round lists is intended
    { M[$t.$f.rps]=$(median ${RPS[$t.$f]}); M[$t.$f.p99]=$(median ${P99[$t.$f]}); M[$t.$f.cpu]=$(median ${CPU[$t.$f]}); }
  done
done
table=$(
  echo "| file | Ferry req/s | Ferry p99 | nginx req/s | nginx p99 | Ferry ÷ nginx | server CPU µs/req (Ferry / nginx) |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  for f in "${FILES[@]}"; do
    ratio=$(awk -v a="${M[ferry.$f.rps]}" -v b="${M[nginx.$f.rps]}" 'BEGIN { printf "%.2f×", a / b }')
    printf '| %s | %s | %s ms | %s | %s ms | %s | %s / %s |\n' "$f" "${M[ferry.$f.rps]}" "${M[ferry.$f.p99]}" \
      "${M[nginx.$f.rps]}" "${M[nginx.$f.p99]}" "$ratio" "${M[ferry.$f.cpu]}" "${M[nginx.$f.cpu]}"
  done
)
notes=$(
  for t in "${ORDER[@]}"; do
    [[ -n "${NOTES[$t]}" ]] && echo "- $t: wrk reported ${NOTES[$t]%; }"
  done
  log_warnings
)

{
  echo "- ferry: $("$FERRY" version 2>/dev/null), git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet 2>/dev/null || echo '+dirty'), $LOOPS event loop, http.static with its defaults"
  echo "- nginx: $(nginx -v 2>&1 | sed 's/^nginx version: //'), worker_processes $LOOPS, sendfile on, tcp_nopush on, open_file_cache max=1024, access_log off"
  echo "- files: random bytes of ${FILES[*]} in the same directory; wrk -t2 -c$CONNS -d${DURATION}s --latency per file and server, $ROUNDS interleaved rounds (even rounds nginx first); medians; CPU = utime+stime of the ferry process / nginx master+worker during the run ÷ requests"
} | publish_report static.md "Ferry static files benchmark" "raw wrk output in bench/results/raw/static-*"
