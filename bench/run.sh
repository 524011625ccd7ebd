#!/usr/bin/env bash
# Hello-world HTTP benchmark: Ferry (plain API and PSR-7, and optionally an earlier Ferry binary) against
# nginx + php-fpm and `php -S`, in one run on one machine, so that only the ratios are compared.
# See bench/README.md.
#
# Knobs (environment):
#   DURATION   seconds per measured wrk run (default 5)
#   ROUNDS     interleaved rounds of (c1, c64) runs per target; the table shows medians (default 3)
#   WORKERS    PHP workers: Ferry num_workers and php-fpm pm.max_children (default 2)
#   TARGETS    comma-separated subset of: ferry,ferry-before,ferry-psr7,fpm,php-s
#              (default: ferry,ferry-psr7,fpm,php-s, plus ferry-before when FERRY_BEFORE_BIN is set)
#   FERRY_BIN  use this ferry binary instead of building build/ferry
#   RESTART_FERRY  1 = restart the Ferry servers every round in that round's order (default: 1 when
#              ferry-before is a target, to compare two binaries without a start-order bias)
#   FERRY_BEFORE_BIN  the ferry binary of target ferry-before ("before a change"; e.g. build-before/ferry);
#              labelled with the git revision in a file REV next to it, if there is one
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
WORKERS=${WORKERS:-2}
FERRY_BEFORE_BIN=${FERRY_BEFORE_BIN:-}
TARGETS=${TARGETS:-ferry,${FERRY_BEFORE_BIN:+ferry-before,}ferry-psr7,fpm,php-s}
case ",$TARGETS," in *,ferry-before,*) RESTART_FERRY=${RESTART_FERRY:-1} ;; *) RESTART_FERRY=${RESTART_FERRY:-0} ;; esac
RESULTS_DIR="$ROOT/bench/results"
CMDLINE="DURATION=$DURATION ROUNDS=$ROUNDS WORKERS=$WORKERS TARGETS=$TARGETS${FERRY_BEFORE_BIN:+ FERRY_BEFORE_BIN=$FERRY_BEFORE_BIN} bench/run.sh"

PHP_OPCACHE=(-d opcache.enable=1 -d opcache.enable_cli=1)
HELLO="Hello, World!"
CLK_TCK=$(getconf CLK_TCK)

die() { echo "bench: error: $*" >&2; exit 1; }
log() { echo "bench: $*" >&2; }

# Benchmark-only packages (nginx, php8.2-fpm, wrk) are installed on request only; quiet when present.
bash "$ROOT/scripts/setup.sh" --bench >&2 || die "scripts/setup.sh --bench failed"

for tool in wrk curl php awk getconf; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found (run scripts/setup.sh)"
done
[[ "$DURATION" =~ ^[0-9]+$ && "$DURATION" -ge 1 ]] || die "DURATION must be a positive integer"
[[ "$ROUNDS" =~ ^[0-9]+$ && "$ROUNDS" -ge 1 ]] || die "ROUNDS must be a positive integer"
[[ "$WORKERS" =~ ^[0-9]+$ && "$WORKERS" -ge 1 ]] || die "WORKERS must be a positive integer"

declare -A WANT=()
IFS=',' read -r -a _t <<<"$TARGETS"
for t in "${_t[@]}"; do
  t=${t// /}
  case "$t" in
    ferry|ferry-before|ferry-psr7|fpm|php-s) WANT[$t]=1 ;;
    "") ;;
    *) die "unknown target '$t' (known: ferry,ferry-before,ferry-psr7,fpm,php-s)" ;;
  esac
done
ORDER=()
for t in ferry ferry-before ferry-psr7 fpm php-s; do [[ -n "${WANT[$t]:-}" ]] && ORDER+=("$t"); done
[[ ${#ORDER[@]} -gt 0 ]] || die "TARGETS selects nothing"

if [[ -n "${WANT[fpm]:-}" ]]; then
  command -v nginx >/dev/null 2>&1 || die "nginx not found (run scripts/setup.sh)"
  command -v php-fpm8.2 >/dev/null 2>&1 || die "php-fpm8.2 not found (run scripts/setup.sh)"
fi

# ---------------------------------------------------------------- processes and cleanup
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ferry-bench.XXXXXX")
PIDS=()      # every process we started directly (its descendants are cleaned up with it)

descendants() {  # pid... -> all descendant pids, one per line
  { cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v roots="$*" '
    { s = $0; sub(/.*\) /, "", s); split(s, a, " "); ppid[$1] = a[2] }
    END {
      n = split(roots, q, " "); for (i = 1; i <= n; i++) seen[q[i]] = 1
      changed = 1
      while (changed) {
        changed = 0
        for (p in ppid) if (!(p in seen) && (ppid[p] in seen)) { seen[p] = 1; changed = 1; print p }
      }
    }'
}

cleanup() {
  local rc=$? pid kids=() i
  trap - EXIT INT TERM
  if [[ ${#PIDS[@]} -gt 0 ]]; then
    mapfile -t kids < <(descendants "${PIDS[@]}")
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for ((i = 0; i < 50; i++)); do
      local alive=0
      for pid in "${PIDS[@]}" "${kids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
      [[ $alive -eq 0 ]] && break
      sleep 0.1
    done
    for pid in "${PIDS[@]}" "${kids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
  fi
  rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "bench: error: command failed at line $LINENO" >&2' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
  # shellcheck disable=SC2016  # PHP code, not shell
  php -r '$s = stream_socket_server("tcp://127.0.0.1:0", $e, $m) or exit(1);
          $n = stream_socket_get_name($s, false); echo substr($n, strrpos($n, ":") + 1);'
}

# check_hello NAME URL PID LOGFILE: wait (<=15 s) until URL answers 200 "Hello, World!"
check_hello() {
  local name=$1 url=$2 pid=$3 logf=$4 body code i
  for ((i = 0; i < 150; i++)); do
    kill -0 "$pid" 2>/dev/null || { cat "$logf" >&2 2>/dev/null || true; die "$name exited during startup (log above)"; }
    body=$(curl -s --max-time 2 -o "$TMP/body" -w '%{http_code}' "$url" 2>/dev/null) && code=$body || code=000
    if [[ "$code" == 200 ]] && [[ "$(cat "$TMP/body")" == "$HELLO" ]]; then return 0; fi
    sleep 0.1
  done
  log "$name: last answer: HTTP $code, body: $(head -c 200 "$TMP/body" 2>/dev/null)"
  [[ -f "$logf" ]] && tail -n 20 "$logf" >&2
  die "$name does not answer \"$HELLO\" at $url"
}

# ---------------------------------------------------------------- targets
declare -A URL SERVER_PIDS PHP_PIDS PHP_ROOT_IS_CHILDREN LOGS

FERRY=${FERRY_BIN:-}
if [[ -n "${WANT[ferry]:-}${WANT[ferry-psr7]:-}" ]]; then
  if [[ -z "$FERRY" ]]; then
    if [[ ! -f "$ROOT/build/CMakeCache.txt" ]]; then
      log "configuring build/ (RelWithDebInfo)"
      (cd "$ROOT" && cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$TMP/configure.log" 2>&1) \
        || { tail -n 30 "$TMP/configure.log" >&2; die "cmake configure of build/ failed"; }
    fi
    log "building ferry"
    (cd "$ROOT" && cmake --build build --target ferry -j"$(nproc)" >"$TMP/build.log" 2>&1) \
      || { tail -n 30 "$TMP/build.log" >&2; die "ferry build failed"; }
    FERRY="$ROOT/build/ferry"
  fi
  [[ -x "$FERRY" ]] || die "ferry binary $FERRY not found"
fi

# ferry-before: another ferry binary (e.g. the build before a change), same worker and config as `ferry`.
BEFORE_REV=""
if [[ -n "${WANT[ferry-before]:-}" ]]; then
  [[ -n "$FERRY_BEFORE_BIN" ]] || die "target ferry-before needs FERRY_BEFORE_BIN=/path/to/ferry"
  [[ -x "$FERRY_BEFORE_BIN" && ! -d "$FERRY_BEFORE_BIN" ]] || die "FERRY_BEFORE_BIN=$FERRY_BEFORE_BIN is not an executable"
  FERRY_BEFORE_BIN=$(cd "$(dirname "$FERRY_BEFORE_BIN")" && pwd)/$(basename "$FERRY_BEFORE_BIN")
  if [[ -f "$(dirname "$FERRY_BEFORE_BIN")/REV" ]]; then
    BEFORE_REV=$(head -n1 "$(dirname "$FERRY_BEFORE_BIN")/REV" | tr -cd '[:alnum:]._+-')
  fi
fi

start_ferry() {  # name worker.php ferry-binary
  local name=$1 script=$2 bin=$3 conf="$TMP/$1.yaml" out="$TMP/$1.out" err="$TMP/$1.err" pid i port=""
  cat >"$conf" <<EOF
version: "3"
server:
  command: "php ${PHP_OPCACHE[*]} $script"
http:
  address: 127.0.0.1:0
  pool:
    num_workers: $WORKERS
EOF
  "$bin" serve -c "$conf" >"$out" 2>"$err" &
  pid=$!; PIDS+=("$pid")
  for ((i = 0; i < 150; i++)); do
    port=$(sed -n 's#^listening on http://127\.0\.0\.1:\([0-9]*\).*#\1#p' "$out" | head -n1)
    [[ -n "$port" ]] && break
    kill -0 "$pid" 2>/dev/null || { cat "$err" >&2; die "$name exited during startup"; }
    sleep 0.1
  done
  [[ -n "$port" ]] || { cat "$err" >&2; die "$name did not print 'listening on' within 15 s"; }
  URL[$name]="http://127.0.0.1:$port/"
  SERVER_PIDS[$name]=$pid         # the ferry process itself
  PHP_PIDS[$name]=$pid            # ... and its descendants are the PHP workers
  PHP_ROOT_IS_CHILDREN[$name]=1
  LOGS[$name]=$err
  check_hello "$name" "${URL[$name]}" "$pid" "$err"
}

mkdir -p "$TMP/www"
printf '<?php\necho "Hello, World!";\n' >"$TMP/www/index.php"
# shellcheck disable=SC2016
printf '<?php\n$s = function_exists("opcache_get_status") ? opcache_get_status(false) : false;\necho ($s && $s["opcache_enabled"]) ? "on" : "off";\n' >"$TMP/www/opcache.php"

start_fpm() {
  local name=fpm port user_line="" fpm_root=() pid_fpm pid_nginx i
  port=$(free_port)
  mkdir -p "$TMP/nginx/tmp" "$TMP/nginx/logs"
  cat >"$TMP/php-fpm.conf" <<EOF
[global]
pid = $TMP/php-fpm.pid
error_log = $TMP/php-fpm.log
daemonize = no

[bench]
listen = $TMP/php-fpm.sock
pm = static
pm.max_children = $WORKERS
EOF
  if [[ $(id -u) -eq 0 ]]; then
    fpm_root=(-R)           # php-fpm refuses to run pools as root without it
    user_line="user root;"  # nginx workers must reach the socket inside our 0700 temp dir
  fi
  php-fpm8.2 -F "${fpm_root[@]}" -y "$TMP/php-fpm.conf" -p "$TMP" "${PHP_OPCACHE[@]}" \
    >"$TMP/php-fpm.out" 2>&1 &
  pid_fpm=$!; PIDS+=("$pid_fpm")
  for ((i = 0; i < 100; i++)); do
    [[ -S "$TMP/php-fpm.sock" ]] && break
    kill -0 "$pid_fpm" 2>/dev/null || { cat "$TMP/php-fpm.out" "$TMP/php-fpm.log" >&2 2>/dev/null; die "php-fpm exited during startup"; }
    sleep 0.1
  done
  [[ -S "$TMP/php-fpm.sock" ]] || die "php-fpm did not create its socket"

  cat >"$TMP/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 1;
$user_line
pid $TMP/nginx.pid;
error_log $TMP/nginx/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_timeout 65;
  keepalive_requests 1000000;
  client_body_temp_path $TMP/nginx/tmp/body;
  proxy_temp_path $TMP/nginx/tmp/proxy;
  fastcgi_temp_path $TMP/nginx/tmp/fastcgi;
  uwsgi_temp_path $TMP/nginx/tmp/uwsgi;
  scgi_temp_path $TMP/nginx/tmp/scgi;
  server {
    listen 127.0.0.1:$port;
    root $TMP/www;
    location = /opcache.php {
      include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $TMP/www/opcache.php;
      fastcgi_pass unix:$TMP/php-fpm.sock;
    }
    location / {
      include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $TMP/www/index.php;
      fastcgi_pass unix:$TMP/php-fpm.sock;
    }
  }
}
EOF
  nginx -p "$TMP/nginx" -e "$TMP/nginx/logs/error.log" -c "$TMP/nginx.conf" >"$TMP/nginx.out" 2>&1 &
  pid_nginx=$!; PIDS+=("$pid_nginx")
  URL[$name]="http://127.0.0.1:$port/"
  SERVER_PIDS[$name]=$pid_nginx   # nginx master + its workers
  PHP_PIDS[$name]=$pid_fpm        # fpm master + its children
  PHP_ROOT_IS_CHILDREN[$name]=0
  LOGS[$name]="$TMP/nginx/logs/error.log"
  check_hello "$name" "${URL[$name]}" "$pid_nginx" "$TMP/nginx/logs/error.log"
  # opcache must be on in the FPM children: ask each of them (a few requests spread over the pool).
  local oc
  for ((i = 0; i < 2 * WORKERS; i++)); do
    oc=$(curl -s --max-time 2 "http://127.0.0.1:$port/opcache.php" || true)
    [[ "$oc" == on ]] || die "opcache is not enabled in php-fpm (answer: '$oc')"
  done
}

start_phps() {
  local name=php-s port pid
  port=$(free_port)
  (cd "$TMP/www" && exec php "${PHP_OPCACHE[@]}" -S "127.0.0.1:$port" "$TMP/www/index.php") \
    >"$TMP/php-s.log" 2>&1 &
  pid=$!; PIDS+=("$pid")
  URL[$name]="http://127.0.0.1:$port/"
  SERVER_PIDS[$name]=""
  PHP_PIDS[$name]=$pid            # one process does everything
  PHP_ROOT_IS_CHILDREN[$name]=0
  LOGS[$name]="$TMP/php-s.log"
  check_hello "$name" "${URL[$name]}" "$pid" "$TMP/php-s.log"
}

for t in "${ORDER[@]}"; do
  log "starting $t"
  case "$t" in
    ferry) start_ferry ferry "$ROOT/tests/php/hello.php" "$FERRY" ;;
    ferry-before) start_ferry ferry-before "$ROOT/tests/php/hello.php" "$FERRY_BEFORE_BIN" ;;
    ferry-psr7) start_ferry ferry-psr7 "$ROOT/tests/php/psr7_hello.php" "$FERRY" ;;
    fpm) start_fpm ;;
    php-s) start_phps ;;
  esac
done
log "all targets answer \"$HELLO\"; benchmarking ${ORDER[*]} (${DURATION}s per run)"

# ---------------------------------------------------------------- measuring
# tree_ticks ROOT_PID INCLUDE_ROOT -> utime+stime ticks of ROOT_PID's descendants (and ROOT_PID itself
# if INCLUDE_ROOT=1), from one snapshot of /proc.
tree_ticks() {
  local root=$1 incl=$2
  [[ -z "$root" ]] && { echo 0; return; }
  { cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v root="$root" -v incl="$incl" '
    { s = $0; sub(/.*\) /, "", s); split(s, a, " "); ppid[$1] = a[2]; t[$1] = a[12] + a[13] }
    END {
      seen[root] = 1; sum = (incl && (root in t)) ? t[root] : 0
      changed = 1
      while (changed) {
        changed = 0
        for (p in ppid) if (!(p in seen) && (ppid[p] in seen)) { seen[p] = 1; changed = 1; sum += t[p] }
      }
      print sum + 0
    }'
}
server_ticks() {  # name
  local n=$1
  if [[ "${PHP_ROOT_IS_CHILDREN[$n]}" == 1 ]]; then
    awk '{ s = $0; sub(/.*\) /, "", s); split(s, a, " "); print a[12] + a[13] }' "/proc/${SERVER_PIDS[$n]}/stat"
  else
    tree_ticks "${SERVER_PIDS[$n]}" 1
  fi
}
php_ticks() {  # name
  local n=$1
  if [[ "${PHP_ROOT_IS_CHILDREN[$n]}" == 1 ]]; then tree_ticks "${PHP_PIDS[$n]}" 0
  else tree_ticks "${PHP_PIDS[$n]}" 1; fi
}

to_ms() {  # wrk latency like 512.00us / 1.23ms / 1.05s -> ms
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) { sub(/us$/, "", v); printf "%.2f", v / 1000 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.2f", v }
    else if (v ~ /m$/) { sub(/m$/, "", v); printf "%.0f", v * 60000 }
    else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.0f", v * 1000 }
    else printf "?" }'
}

declare -A R1 P1 R64 P64 CPU_S CPU_P NOTES
mkdir -p "$RESULTS_DIR/raw"

# parse_wrk FILE -> sets W_RPS W_P99 W_REQS W_ERR (empty when clean)
parse_wrk() {
  local f=$1 non2xx sock
  W_RPS=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$f")
  W_P99=$(to_ms "$(awk '$1 == "99%" { print $2 }' "$f")")
  W_REQS=$(awk '/ requests in / { print $1 }' "$f")
  non2xx=$(awk -F': *' '/Non-2xx or 3xx responses/ { print $2 }' "$f")
  sock=$(awk '/Socket errors:/ { sub(/^ *Socket errors: */, ""); print }' "$f")
  W_ERR=""
  [[ -n "$non2xx" ]] && W_ERR+="non-2xx: $non2xx; "
  [[ -n "$sock" ]] && W_ERR+="socket errors: $sock; "
  [[ -n "$W_RPS" && -n "$W_REQS" ]] || die "could not parse wrk output $f"
}

median() {  # numbers... -> the median (the lower middle for an even count)
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

for t in "${ORDER[@]}"; do
  log "$t: warm-up"
  wrk -t1 -c4 -d2s "${URL[$t]}" >"$RESULTS_DIR/raw/$t-warmup.txt" 2>&1 || die "wrk failed on $t"
  NOTES[$t]=""
done

# Rounds interleave the targets so that a noisy neighbour or a slow minute hits all of them alike;
# the table shows each figure's median over the rounds.
declare -A RR1 PP1 RR64 PP64 CS CP
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
        ferry|ferry-before|ferry-psr7)
          kill -TERM "${SERVER_PIDS[$t]}" 2>/dev/null || true
          wait "${SERVER_PIDS[$t]}" 2>/dev/null || true
          ;;
      esac
    done
    for t in "${round_order[@]}"; do
      case "$t" in
        ferry) start_ferry ferry "$ROOT/tests/php/hello.php" "$FERRY" ;;
        ferry-before) start_ferry ferry-before "$ROOT/tests/php/hello.php" "$FERRY_BEFORE_BIN" ;;
        ferry-psr7) start_ferry ferry-psr7 "$ROOT/tests/php/psr7_hello.php" "$FERRY" ;;
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
    CS[$t]+="$(awk -v d=$((s1 - s0)) -v hz="$CLK_TCK" -v n="$W_REQS" 'BEGIN { printf "%.1f", d / hz * 1e6 / n }') "
    CP[$t]+="$(awk -v d=$((p1 - p0)) -v hz="$CLK_TCK" -v n="$W_REQS" 'BEGIN { printf "%.1f", d / hz * 1e6 / n }') "
  done
done
for t in "${ORDER[@]}"; do
  # shellcheck disable=SC2086 # word splitting of the per-round lists is intended
  { R1[$t]=$(median ${RR1[$t]}); P1[$t]=$(median ${PP1[$t]}); R64[$t]=$(median ${RR64[$t]});
    P64[$t]=$(median ${PP64[$t]}); CPU_S[$t]=$(median ${CS[$t]}); CPU_P[$t]=$(median ${CP[$t]}); }
  [[ -z "${SERVER_PIDS[$t]}" ]] && CPU_S[$t]="—"
done

# ---------------------------------------------------------------- report
label() {
  case "$1" in
    ferry) echo "Ferry, plain API (hello.php)" ;;
    ferry-before) echo "Ferry before${BEFORE_REV:+ ($BEFORE_REV)}, plain API (hello.php)" ;;
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
  head="| target | c1 req/s | c1 p99 | c64 req/s | c64 p99 | ratio to nginx+php-fpm at c64 | CPU µs/req (server / PHP) |"
  rule="|---|---:|---:|---:|---:|---:|---:|"
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
    printf '| %s | %s | %s ms | %s | %s ms | %s | %s / %s |' "$(label "$t")" "${R1[$t]}" "${P1[$t]}" \
      "${R64[$t]}" "${P64[$t]}" "$ratio" "${CPU_S[$t]}" "${CPU_P[$t]}"
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
  for t in "${ORDER[@]}"; do
    [[ -n "${NOTES[$t]}" ]] && echo "- $t: wrk reported ${NOTES[$t]%; }"
    case "$t" in
      ferry|ferry-before|ferry-psr7)
        w=$(grep -E ' (WARN|ERROR) ' "${LOGS[$t]}" | head -n 5 || true)
        [[ -n "$w" ]] && printf -- '- %s stderr warnings/errors (first 5):\n    %s\n' "$t" "${w//$'\n'/$'\n    '}"
        ;;
      fpm)
        w=$(grep -hiE 'warn|error|alert|emerg' "$TMP/nginx/logs/error.log" "$TMP/php-fpm.log" 2>/dev/null | head -n 5 || true)
        [[ -n "$w" ]] && printf -- '- fpm: nginx/php-fpm log warnings (first 5):\n    %s\n' "${w//$'\n'/$'\n    '}"
        ;;
    esac
  done
  true
)

cpu_model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
{
  echo "# Ferry hello-world benchmark"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "- machine: $(nproc) CPUs, ${cpu_model:-unknown CPU}, $(uname -sr); client (wrk) and servers share the cores"
  echo "- command: \`$CMDLINE\`"
  echo "- ferry: ${FERRY:+$("$FERRY" version 2>/dev/null), }git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet 2>/dev/null || echo '+dirty'), build type $(awk -F= '/^CMAKE_BUILD_TYPE:/ { print $2 }' "$ROOT/build/CMakeCache.txt" 2>/dev/null)"
  if [[ -n "${WANT[ferry-before]:-}" ]]; then
    echo "- ferry-before: $FERRY_BEFORE_BIN ($("$FERRY_BEFORE_BIN" version 2>/dev/null || echo '?')), git ${BEFORE_REV:-? (no REV file next to it)}; same hello.php and config as ferry"
  fi
  echo "- peers: $(nginx -v 2>&1 | sed 's/^nginx version: //'), $(php -r 'echo "PHP ", PHP_VERSION;'), $(wrk -v 2>&1 | head -n1 | awk '{ print $1, $2 }'); opcache on everywhere (-d opcache.enable=1 -d opcache.enable_cli=1, checked in php-fpm)"
  echo "- runs: warm-up wrk -t1 -c4 -d2s per target, then $ROUNDS interleaved rounds (odd rounds in target order, even rounds reversed$([[ "$RESTART_FERRY" == 1 ]] && echo "; Ferry servers restarted every round in that order")) of wrk -t1 -c1 -d${DURATION}s and wrk -t2 -c64 -d${DURATION}s (--latency) per target; figures are medians over the rounds"
  echo "- CPU µs/req: utime+stime from /proc during the c64 run ÷ requests completed; server = ferry process / nginx master+worker, PHP = ferry's workers / php-fpm master+children"
  echo
  echo "$table"
  if [[ -n "$notes" ]]; then echo; echo "Notes:"; echo; echo "$notes"; fi
} >"$RESULTS_DIR/latest.md"

echo
echo "$table"
[[ -n "$notes" ]] && { echo; echo "$notes"; }
echo
log "written to bench/results/latest.md (raw wrk output in bench/results/raw/)"
