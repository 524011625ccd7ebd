#!/usr/bin/env bash
# TLS benchmark: Ferry's HTTPS (http.ssl) against nginx with the same certificate (P-256), in one run on one
# machine: TLS 1.3, HTTP/1.1 keep-alive and HTTP/2. Both with one event loop / worker process; PHP hello world
# on Ferry's workers against nginx + php-fpm with as many children.
#
#   static 1 KiB and 64 KiB, PHP hello  wrk over https (HTTP/1.1 keep-alive: the cipher's cost, not the
#                                      handshake's), and h2load over HTTP/2 (H2_CONNS connections, H2_STREAMS
#                                      streams each)
#   full handshakes per second         h2load --h1 -n with "Connection: close" (each request a new connection)
#   resumed handshakes per second      openssl s_time -reuse, CLIENTS processes side by side (tickets)
#
# Knobs (environment):
#   DURATION   seconds per run (default 5)
#   ROUNDS     interleaved rounds; the table shows medians (default 3)
#   CONNS      wrk connections (default 64)
#   H2_CONNS   h2load connections (default 16), H2_STREAMS concurrent streams on each (default 16)
#   CLIENTS    handshake clients (h2load connections / s_time processes; default 16 / 4)
#   HANDSHAKES full handshakes per h2load run (default 4000)
#   WORKERS    PHP workers (Ferry) and php-fpm children (default 2)
#   FERRY_BIN  use this ferry binary instead of building build/ferry
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-64}
WORKERS=${WORKERS:-2}
LOOPS=1 # Ferry's http.io_threads and nginx's worker_processes, set alike
RESULTS_DIR="$ROOT/bench/results"
CMDLINE="DURATION=$DURATION ROUNDS=$ROUNDS CONNS=$CONNS H2_CONNS=${H2_CONNS:-16} H2_STREAMS=${H2_STREAMS:-16} WORKERS=$WORKERS bench/tls.sh"

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
bench_prepare wrk h2load curl php awk nginx openssl php-fpm8.2
for v in DURATION ROUNDS CONNS WORKERS; do
  [[ "${!v}" =~ ^[0-9]+$ && "${!v}" -ge 1 ]] || die "$v must be a positive integer"
done

# ---------------------------------------------------------------- certificate, files, PHP
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$TMP/key.pem" \
  -out "$TMP/cert.pem" -days 2 -subj "/CN=127.0.0.1" -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null
mkdir -p "$TMP/public"
head -c 1024 /dev/urandom >"$TMP/public/1k.bin"
head -c 65536 /dev/urandom >"$TMP/public/64k.bin"
printf '<?php\necho "Hello, World!";\n' >"$TMP/www/index.php"

# ---------------------------------------------------------------- targets
build_ferry
start_ferry ferry "$ROOT/tests/php/hello.php" "$FERRY" "" "  io_threads: $LOOPS
  middleware: [\"static\"]
  static:
    dir: \"$TMP/public\"
  ssl:
    address: 127.0.0.1:0
    cert: \"$TMP/cert.pem\"
    key: \"$TMP/key.pem\""
tport=$(sed -n 's#^listening on https://127\.0\.0\.1:\([0-9]*\).*#\1#p' "$TMP/ferry.out" | head -n1)
[[ -n "$tport" ]] || die "ferry printed no https listening line"
declare -A HTTPS
HTTPS[ferry]="https://127.0.0.1:$tport"

start_fpm # php-fpm with WORKERS children (and a plain nginx of its own, unused here)
port=$(free_port)
tport=$(free_port)
WORKER_PROCESSES=$LOOPS NGINX_HTTP_EXTRA="sendfile on;
  open_file_cache max=1024 inactive=60s;
  types { application/octet-stream bin; }
  ssl_protocols TLSv1.2 TLSv1.3;
  ssl_session_cache shared:SSL:10m;
  ssl_session_tickets on;" start_nginx nginx "$port" "    listen 127.0.0.1:$tport ssl http2;
    ssl_certificate $TMP/cert.pem;
    ssl_certificate_key $TMP/key.pem;
    root $TMP/public;
    location = /hello {
      include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $TMP/www/index.php;
      fastcgi_pass unix:$TMP/php-fpm.sock;
    }"
HTTPS[nginx]="https://127.0.0.1:$tport"
SERVER_PIDS[nginx]=$NGINX_PID
LOGS[nginx]="$TMP/nginx-nginx/logs/error.log"
ORDER=(ferry nginx)

# Both answer the same bytes over TLS 1.3 before anything is measured.
for t in "${ORDER[@]}"; do
  for ((i = 0; i < 50; i++)); do
    curl -sk --max-time 2 "${HTTPS[$t]}/1k.bin" -o /dev/null && break
    sleep 0.1
  done
  for f in 1k.bin 64k.bin; do
    [[ "$(curl -sk --tlsv1.3 "${HTTPS[$t]}/$f" | sha256sum)" == "$(sha256sum <"$TMP/public/$f")" ]] \
      || die "$t does not serve $f over TLS 1.3"
  done
  [[ "$(curl -sk "${HTTPS[$t]}/hello")" == "$HELLO" ]] || die "$t does not answer \"$HELLO\" on /hello"
done
log "both serve over TLS 1.3; benchmarking (${DURATION}s runs, $ROUNDS rounds)"

# ---------------------------------------------------------------- measuring
mkdir -p "$RESULTS_DIR/raw"
H2_CLIENTS=${CLIENTS:-16}
HANDSHAKES=${HANDSHAKES:-4000}
ST_CLIENTS=${CLIENTS:-4}
H2_CONNS=${H2_CONNS:-16}
H2_STREAMS=${H2_STREAMS:-16}
CASES=(1k 64k php h2-1k h2-64k h2-php full resumed)
declare -A V
full_rate() {  # url -> full handshakes (a request each) per second
  local out=$1.txt
  # A count, not -D: h2load 1.52's timed mode waits for good on connections the server closed.
  timeout 120 h2load --h1 -n "$HANDSHAKES" -c "$H2_CLIENTS" -H "Connection: close" "$2/1k.bin" >"$out" 2>&1 || true
  awk '/succeeded/ { ok = $8 } /^finished in/ { s = $3 + 0; if ($3 ~ /ms,$/) s /= 1000; else if ($3 ~ /us,$/) s /= 1000000 } END { if (s > 0) printf "%d", ok / s; else print 0 }' "$out"
}
h2_rate() {  # out url -> requests per second over HTTP/2 (h2load, DURATION seconds)
  h2load -c "$H2_CONNS" -m "$H2_STREAMS" -t 2 -D "$DURATION" "$2" >"$1" 2>&1 || true
  grep -q ' 0 failed, 0 errored' "$1" || die "h2load had failures on $2 (see $1)"
  grep -q '^Application protocol: h2' "$1" || die "h2load did not negotiate h2 on $2 (see $1)"
  awk '/^finished in/ { gsub(",", "", $4); printf "%d", $4 }' "$1"
}
resumed_rate() {  # host:port -> resumed handshakes (a request each) per second, ST_CLIENTS s_time side by side
  local out=$1 i total=0 n
  for ((i = 0; i < ST_CLIENTS; i++)); do
    openssl s_time -connect "$2" -reuse -time "$DURATION" -www /1k.bin >"$out.$i.txt" 2>&1 &
  done
  wait
  for ((i = 0; i < ST_CLIENTS; i++)); do
    n=$(sed -n '/Now timing with session id reuse/,$p' "$out.$i.txt" | awk '/connections in .* real seconds/ { print $1 }')
    total=$((total + ${n:-0}))
  done
  echo $((total / DURATION))
}
for ((r = 1; r <= ROUNDS; r++)); do
  round_order=("${ORDER[@]}")
  ((r % 2 == 0)) && round_order=(nginx ferry)
  for t in "${round_order[@]}"; do
    url=${HTTPS[$t]}
    for c in 1k 64k php; do
      path=/1k.bin; [[ $c == 64k ]] && path=/64k.bin; [[ $c == php ]] && path=/hello
      log "round $r/$ROUNDS, $t, $c"
      out="$RESULTS_DIR/raw/tls-$t-$c-r$r.txt"
      wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency "$url$path" >"$out" 2>&1 || die "wrk failed on $t"
      parse_wrk "$out"
      V[$t.$c]+="$W_RPS "
      log "round $r/$ROUNDS, $t, h2-$c"
      V[$t.h2-$c]+="$(h2_rate "$RESULTS_DIR/raw/tls-$t-h2-$c-r$r.txt" "$url$path") "
    done
    log "round $r/$ROUNDS, $t, handshakes"
    V[$t.full]+="$(full_rate "$RESULTS_DIR/raw/tls-$t-full-r$r" "$url") "
    V[$t.resumed]+="$(resumed_rate "$RESULTS_DIR/raw/tls-$t-resumed-r$r" "${url#https://}") "
  done
done

# ---------------------------------------------------------------- report
declare -A M
for t in "${ORDER[@]}"; do
  # shellcheck disable=SC2086 # word splitting of the per-round lists is intended
  for c in "${CASES[@]}"; do M[$t.$c]=$(median ${V[$t.$c]}); done
done
label() {
  case $1 in
    1k) echo "static 1 KiB, req/s" ;; 64k) echo "static 64 KiB, req/s" ;;
    php) echo "PHP hello world, req/s (nginx: + php-fpm)" ;;
    h2-1k) echo "HTTP/2: static 1 KiB, req/s" ;; h2-64k) echo "HTTP/2: static 64 KiB, req/s" ;;
    h2-php) echo "HTTP/2: PHP hello world, req/s (nginx: + php-fpm)" ;;
    full) echo "full handshakes + 1 KiB, /s" ;; resumed) echo "resumed handshakes + 1 KiB, /s" ;;
  esac
}
table=$(
  echo "| over TLS 1.3 (HTTP/1.1 unless said) | Ferry | nginx | Ferry ÷ nginx | rounds (Ferry; nginx) |"
  echo "|---|---:|---:|---:|---|"
  for c in "${CASES[@]}"; do
    ratio=$(awk -v a="${M[ferry.$c]}" -v b="${M[nginx.$c]}" 'BEGIN { if (b > 0) printf "%.2f×", a / b; else print "—" }')
    printf '| %s | %s | %s | %s | %s; %s |\n' "$(label "$c")" "${M[ferry.$c]}" "${M[nginx.$c]}" "$ratio" \
      "${V[ferry.$c]% }" "${V[nginx.$c]% }"
  done
)
notes=$(
  log_warnings
)
{
  echo "- ferry: $("$FERRY" version 2>/dev/null), git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet 2>/dev/null || echo '+dirty'), $LOOPS event loop, $WORKERS PHP workers, http.ssl with its defaults, http.static"
  echo "- nginx: $(nginx -v 2>&1 | sed 's/^nginx version: //'), worker_processes $LOOPS, ssl_session_cache shared 10m, tickets on, sendfile on, open_file_cache; php-fpm pm=static with $WORKERS children, opcache on"
  echo "- $(openssl version); one self-signed P-256 certificate for both; TLS 1.3; suites negotiated (h2load): ferry $(grep -h '^Cipher:' "$RESULTS_DIR"/raw/tls-ferry-full-r1.txt | head -n1 | cut -d' ' -f2), nginx $(grep -h '^Cipher:' "$RESULTS_DIR"/raw/tls-nginx-full-r1.txt | head -n1 | cut -d' ' -f2)"
  echo "- wrk -t2 -c$CONNS -d${DURATION}s (HTTP/1.1 keep-alive); HTTP/2: h2load -t2 -c$H2_CONNS -m$H2_STREAMS -D$DURATION; full handshakes: h2load --h1 -c$H2_CLIENTS -n$HANDSHAKES with Connection: close (a new connection per request); resumed: $ST_CLIENTS × openssl s_time -reuse -www /1k.bin for ${DURATION}s (one connection at a time each); $ROUNDS interleaved rounds, medians"
} | publish_report "tls-$(date -u +%F-%H%M).md" "Ferry TLS benchmark (HTTP/1.1 and HTTP/2 over TLS 1.3)" "raw output in bench/results/raw/tls-*" "" "the clients (wrk, h2load, openssl)"
