# shellcheck shell=bash disable=SC2034  # URL, LOGS ... are read by the sourcing script
# Shared by the benchmark scripts (sourced, not run): starting the servers on free ports as child
# processes of the script, cleaning them up on every exit, and reading CPU time from /proc.
# The sourcing script sets ROOT and WORKERS first.

PHP_OPCACHE=(-d opcache.enable=1 -d opcache.enable_cli=1)
HELLO="Hello, World!"

die() { echo "bench: error: $*" >&2; exit 1; }
log() { echo "bench: $*" >&2; }

bench_prepare() {  # tools... : install the benchmark-only packages if missing, then check the tools
  # Benchmark-only packages (nginx, php8.2-fpm, wrk) are installed on request only; quiet when present.
  # shellcheck disable=SC2153  # ROOT is set by the sourcing script
  bash "$ROOT/scripts/setup.sh" --bench >&2 || die "scripts/setup.sh --bench failed"
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found (run scripts/setup.sh)"
  done
}

# ---------------------------------------------------------------- processes and cleanup
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ferry-bench.XXXXXX")
PIDS=()      # every process we started directly (its descendants are cleaned up with it)
FERRY_PREFIX=()  # a command that start_ferry runs ferry under (e.g. taskset -c 0: its workers inherit it)
FPM_PREFIX=()    # the same for start_fpm's php-fpm and nginx (and start_nginx's nginx)

allowed_cpus() {  # -> the CPUs this process may run on (sched_getaffinity: taskset and cpusets count), ascending
  python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)))'
}

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

running() {  # pid: alive and not a zombie
  [[ -r "/proc/$1/stat" ]] && awk '{ s = $0; sub(/.*\) /, "", s); exit (substr(s, 1, 1) == "Z") }' "/proc/$1/stat" 2>/dev/null
}

stop_server() {  # pid: TERM it (and KILL what is left of it and its descendants after 5 s), forget it
  local pid=$1 kids=() i p keep=()
  mapfile -t kids < <(descendants "$pid")
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do running "$pid" || break; sleep 0.1; done
  for p in "$pid" "${kids[@]}"; do running "$p" && kill -KILL "$p" 2>/dev/null; done
  wait "$pid" 2>/dev/null || true
  for p in "${PIDS[@]}"; do [[ "$p" != "$pid" ]] && keep+=("$p"); done
  PIDS=("${keep[@]}")
}

cleanup() {
  local rc=$? pid kids=() i
  trap - EXIT INT TERM
  if [[ ${#PIDS[@]} -gt 0 ]]; then
    mapfile -t kids < <(descendants "${PIDS[@]}")
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for ((i = 0; i < 50; i++)); do
      local alive=0
      for pid in "${PIDS[@]}" "${kids[@]}"; do running "$pid" && alive=1; done
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

build_ferry() {  # sets FERRY: $FERRY_BIN, or build/ferry built now
  FERRY=${FERRY_BIN:-}
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
}

# FERRY_HTTP_EXTRA: YAML lines added under `http:` (indented by two spaces) for every Ferry target.
FERRY_HTTP_EXTRA=${FERRY_HTTP_EXTRA:-}
# name worker.php ferry-binary [more http.pool lines, e.g. "    max_jobs: 10000"] [more http lines, e.g.
# "  io_threads: 2"]
start_ferry() {
  local name=$1 script=$2 bin=$3 pool_extra=${4:-} http_extra=${5:-} top_extra=${6:-}
  local conf="$TMP/$1.yaml" out="$TMP/$1.out" err="$TMP/$1.err" pid i port=""
  cat >"$conf" <<EOF
version: "3"
server:
  command: "php ${PHP_OPCACHE[*]} $script"
http:
  address: 127.0.0.1:0
${http_extra}
  pool:
    num_workers: $WORKERS
${pool_extra}
${FERRY_HTTP_EXTRA}
${top_extra}
EOF
  : >"$out"  # exists before the poll below reads it (pipefail would end the script on sed's error)
  "${FERRY_PREFIX[@]}" "$bin" serve -c "$conf" >"$out" 2>"$err" &
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

# start_nginx NAME PORT SERVER_BODY: nginx with WORKER_PROCESSES workers (default 1) in $TMP/nginx-NAME/,
# listening on 127.0.0.1:PORT with SERVER_BODY inside its server {} and $NGINX_HTTP_EXTRA in http {};
# sets NGINX_PID (the master; its workers are its children).
start_nginx() {
  local name=$1 port=$2 body=$3 dir="$TMP/nginx-$1" user_line=""
  mkdir -p "$dir/tmp" "$dir/logs"
  # nginx workers must reach files and sockets inside our 0700 temp dir
  [[ $(id -u) -eq 0 ]] && user_line="user root;"
  cat >"$dir/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes ${WORKER_PROCESSES:-1};
$user_line
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_timeout 65;
  keepalive_requests 1000000;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  $NGINX_HTTP_EXTRA
  server {
    listen 127.0.0.1:$port;
$body
  }
}
EOF
  "${FPM_PREFIX[@]}" nginx -p "$dir" -e "$dir/logs/error.log" -c "$dir/nginx.conf" >"$dir/nginx.out" 2>&1 &
  NGINX_PID=$!; PIDS+=("$NGINX_PID")
}

# start_fpm serves $TMP/www/index.php (the caller writes it) for every path but /opcache.php.
# FPM_PHP_ARGS: more `-d key=value` for php-fpm; NGINX_HTTP_EXTRA: more directives in nginx's http {}.
[[ -v FPM_PHP_ARGS ]] || FPM_PHP_ARGS=()
NGINX_HTTP_EXTRA=${NGINX_HTTP_EXTRA:-}
start_fpm() {
  local name=fpm port fpm_root=() pid_fpm pid_nginx i
  port=$(free_port)
  # shellcheck disable=SC2016  # PHP code, not shell
  printf '<?php\n$s = function_exists("opcache_get_status") ? opcache_get_status(false) : false;\necho ($s && $s["opcache_enabled"]) ? "on" : "off";\n' >"$TMP/www/opcache.php"
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
  fi
  "${FPM_PREFIX[@]}" php-fpm8.2 -F "${fpm_root[@]}" -y "$TMP/php-fpm.conf" -p "$TMP" "${PHP_OPCACHE[@]}" "${FPM_PHP_ARGS[@]}" \
    >"$TMP/php-fpm.out" 2>&1 &
  pid_fpm=$!; PIDS+=("$pid_fpm")
  for ((i = 0; i < 100; i++)); do
    [[ -S "$TMP/php-fpm.sock" ]] && break
    kill -0 "$pid_fpm" 2>/dev/null || { cat "$TMP/php-fpm.out" "$TMP/php-fpm.log" >&2 2>/dev/null; die "php-fpm exited during startup"; }
    sleep 0.1
  done
  [[ -S "$TMP/php-fpm.sock" ]] || die "php-fpm did not create its socket"

  start_nginx fpm "$port" "
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
    }"
  pid_nginx=$NGINX_PID
  URL[$name]="http://127.0.0.1:$port/"
  SERVER_PIDS[$name]=$pid_nginx   # nginx master + its workers
  PHP_PIDS[$name]=$pid_fpm        # fpm master + its children
  PHP_ROOT_IS_CHILDREN[$name]=0
  LOGS[$name]="$TMP/nginx-fpm/logs/error.log"
  check_hello "$name" "${URL[$name]}" "$pid_nginx" "${LOGS[$name]}"
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
  local n=$1 live reaped
  if [[ "${PHP_ROOT_IS_CHILDREN[$n]}" == 1 ]]; then
    # The live workers, plus the workers that exited and were reaped (recycling): the ferry process's
    # cutime + cstime.
    live=$(tree_ticks "${PHP_PIDS[$n]}" 0)
    reaped=$(awk '{ s = $0; sub(/.*\) /, "", s); split(s, a, " "); print a[14] + a[15] }' "/proc/${PHP_PIDS[$n]}/stat")
    echo $((live + reaped))
  else
    tree_ticks "${PHP_PIDS[$n]}" 1
  fi
}

CLK_TCK=$(getconf CLK_TCK)
per_request_us() {  # ticks requests -> CPU µs per request
  awk -v d="$1" -v hz="$CLK_TCK" -v n="$2" 'BEGIN { printf "%.1f", d / hz * 1e6 / n }'
}

median() {  # numbers... -> the median (the lower middle for an even count)
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

to_ms() {  # wrk latency like 512.00us / 1.23ms / 1.05s -> ms
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) { sub(/us$/, "", v); printf "%.2f", v / 1000 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.2f", v }
    else if (v ~ /m$/) { sub(/m$/, "", v); printf "%.0f", v * 60000 }
    else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.0f", v * 1000 }
    else printf "?" }'
}

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

group_pids() {  # name server|php -> the pids of that target's server or PHP processes, one per line
  local n=$1 which=$2
  if [[ "$which" == server ]]; then
    [[ -z "${SERVER_PIDS[$n]}" ]] && return 0
    echo "${SERVER_PIDS[$n]}"
    [[ "${PHP_ROOT_IS_CHILDREN[$n]}" == 1 ]] || descendants "${SERVER_PIDS[$n]}"
  else
    [[ "${PHP_ROOT_IS_CHILDREN[$n]}" == 1 ]] || echo "${PHP_PIDS[$n]}"
    descendants "${PHP_PIDS[$n]}"
  fi
}

reset_peak_rss() {  # pid...: restart each process's VmHWM (peak RSS) at its current RSS (Linux ≥ 4.0)
  local p
  for p in "$@"; do echo 5 >"/proc/$p/clear_refs" 2>/dev/null || true; done
}

sum_status_kib() {  # field pid... -> the sum of /proc/PID/status FIELD (VmRSS, VmHWM) in KiB
  local field=$1; shift
  [[ $# -eq 0 ]] && { echo 0; return; }
  local files=() p
  for p in "$@"; do files+=("/proc/$p/status"); done
  awk -v f="$field:" '$1 == f { s += $2 } END { print s + 0 }' "${files[@]}" 2>/dev/null || echo 0
}

# log_warnings: the report's notes on the first 5 warnings or errors ferry (LOGS[ferry]) and nginx (LOGS[nginx])
# logged during the run; nothing when there were none.
log_warnings() {
  local w
  w=$(grep -hE ' (WARN|ERROR) ' "${LOGS[ferry]}" | head -n 5 || true)
  [[ -n "$w" ]] && printf -- '- ferry stderr warnings/errors (first 5):\n    %s\n' "${w//$'\n'/$'\n    '}"
  w=$(grep -hiE 'warn|error|alert|emerg' "${LOGS[nginx]}" 2>/dev/null | head -n 5 || true)
  [[ -n "$w" ]] && printf -- '- nginx log warnings (first 5):\n    %s\n' "${w//$'\n'/$'\n    '}"
  true
}

# publish_report FILE TITLE RAW [DATE_NOTE] [CLIENTS]: writes bench/results/FILE: "# TITLE", the date (and
# DATE_NOTE after it), the machine, $CMDLINE, the "- ..." lines read from stdin, then $table and $notes; prints
# the table and the notes. RAW says where the raw output went; CLIENTS which clients share the cores.
# shellcheck disable=SC2154  # table and notes are set by the caller
publish_report() {
  local file=$1 title=$2 raw=$3 date_note=${4:-} clients=${5:-"the clients (wrk, curl)"} cpu_model
  cpu_model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
  {
    echo "# $title"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')$date_note"
    echo "- machine: $(nproc) CPUs, ${cpu_model:-unknown CPU}, $(uname -sr); $clients and the servers share the cores"
    echo "- command: \`$CMDLINE\`"
    cat
    echo
    echo "$table"
    if [[ -n "$notes" ]]; then echo; echo "Notes:"; echo; echo "$notes"; fi
  } >"$RESULTS_DIR/$file"
  echo
  echo "$table"
  [[ -n "$notes" ]] && { echo; echo "$notes"; }
  echo
  log "written to bench/results/$file ($raw)"
}
