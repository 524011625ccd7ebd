#!/usr/bin/env bash
# Framework apps on Ferry against the same app on nginx + php-fpm (issue 42): examples/symfony's JSON route
# (/api/info) and its Twig page (/: session, CSRF token, an SQLite query), and examples/laravel's JSON route
# and Blade page when that example exists; one run on one machine, the targets interleaved, reported as
# ratios. opcache on everywhere with opcache.validate_timestamps=0; the same number of PHP processes.
# The page is measured twice: as returning visitors see it (each request carries the cookies of one of
# SESSIONS sessions made beforehand, as a browser sends them back: the session file is read and rewritten)
# and as first visits (no cookie: every request starts a session, i.e. creates a file, on both targets).
# Figures: req/s and p99 per route, RSS and PSS per PHP worker (Ferry's workers, php-fpm's children) after the runs.
# See bench/README.md ("Frameworks").
#
# Knobs (environment):
#   DURATION   seconds per measured wrk run (default 5)
#   ROUNDS     interleaved rounds; the table shows medians (default 3)
#   WORKERS    PHP processes: Ferry num_workers and php-fpm pm.max_children (default 2)
#   CONNS      wrk connections (default 16)
#   FORK       1 = Ferry's workers forked from a booted template (http.pool.fork: true: they share its opcache
#              and its booted app's pages copy-on-write), 0 = each worker starts PHP (default 0)
#   SESSIONS   sessions the returning-visitor runs cycle through (default 64)
#   APPS       comma-separated: symfony,laravel (default: each example that exists)
#   REPORT     file name under bench/results (default frameworks-<date>.md)
#   FERRY_BIN  use this ferry binary instead of building build/ferry
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
WORKERS=${WORKERS:-2}
CONNS=${CONNS:-16}
SESSIONS=${SESSIONS:-64}
FORK=${FORK:-0}
DEFAULT_APPS=symfony
[[ -f "$ROOT/examples/laravel/public/index.php" ]] && DEFAULT_APPS+=,laravel
APPS=${APPS:-$DEFAULT_APPS}
REPORT=${REPORT:-frameworks-$(date -u +%Y-%m-%d-%H%M).md}
[[ "$REPORT" =~ ^[A-Za-z0-9._-]+\.md$ ]] || { echo "REPORT must be a file name ending in .md" >&2; exit 1; }
RESULTS_DIR="$ROOT/bench/results"
CMDLINE="DURATION=$DURATION ROUNDS=$ROUNDS WORKERS=$WORKERS CONNS=$CONNS SESSIONS=$SESSIONS FORK=$FORK APPS=$APPS bench/frameworks.sh"

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
bench_prepare wrk curl php nginx php-fpm8.2 awk
build_ferry
OPCACHE_PROD=("${PHP_OPCACHE[@]}" -d opcache.validate_timestamps=0 -d opcache.memory_consumption=128)

# route[:visitor]: "returning" requests carry one of SESSIONS sessions' cookies, "first" none
declare -A ROUTES=([symfony]="/api/info /:returning /:first" [laravel]="/api/info /:returning /:first")
declare -A ROUTE_LABEL=([/api/info]="\`/api/info\`" [/:returning]="\`/\` returning visitor" [/:first]="\`/\` first visit")
declare -A FERRY_PORT FPM_PORT FERRY_PID FPM_PID APPDIR

# The app as a project of its own under $TMP (its var/ or storage/ fresh), deployed as in production: Symfony's
# container compiled into var/cache beforehand (what bin/console cache:warmup does at a deploy; else the first
# php-fpm request, or Ferry's fork template, would compile it while serving).
prepare_app() {
  local app=$1 dir="$TMP/$1"
  cp -r "$ROOT/examples/$app" "$dir"
  rm -rf "$dir/var" "$dir/storage/framework/cache/data" 2>/dev/null || true
  APPDIR[$app]=$dir
  if [[ "$app" == symfony ]]; then
    (cd "$dir" && APP_ENV=prod APP_DEBUG=0 php "${OPCACHE_PROD[@]}" -r \
      'require "vendor/autoload.php"; (new App\Kernel("prod", false))->boot();') || die "symfony: cache warm-up failed"
    [[ -d "$dir/var/cache/prod" ]] || die "symfony: no var/cache/prod after the warm-up"
  fi
}

start_ferry_app() {
  local app=$1 dir=${APPDIR[$1]} conf="$TMP/ferry-$1.yaml" out="$TMP/ferry-$1.out" port="" i
  local cmd env_lines
  case "$app" in
    symfony) cmd="php ${OPCACHE_PROD[*]} $dir/public/index.php"
      env_lines="    APP_RUNTIME: Ferry\\Runtime\\Runtime
    APP_ENV: prod
    APP_DEBUG: \"0\"" ;;
    laravel) cmd="php ${OPCACHE_PROD[*]} $ROOT/php-worker/bin/ferry-laravel"
      env_lines="    APP_BASE_PATH: $dir
    APP_ENV: production
    APP_DEBUG: \"false\"" ;;
  esac
  cat >"$conf" <<EOF
version: "3"
server:
  command: "$cmd"
  env:
$env_lines
    FERRY_PHP_WORKER: $ROOT/php-worker
http:
  address: 127.0.0.1:0
  middleware: ["static", "sendfile"]
  static:
    dir: "$dir/public"
    forbid: [".php"]
  pool:
    num_workers: $WORKERS
    fork: $([[ "$FORK" == 1 ]] && echo true || echo false)
EOF
  : >"$out"
  (cd "$dir" && exec "$FERRY" serve -c "$conf") >"$out" 2>"$TMP/ferry-$app.err" &
  FERRY_PID[$app]=$!; PIDS+=("${FERRY_PID[$app]}")
  for ((i = 0; i < 300; i++)); do
    port=$(sed -n 's#^listening on http://127\.0\.0\.1:\([0-9]*\).*#\1#p' "$out" | head -n1)
    [[ -n "$port" ]] && break
    kill -0 "${FERRY_PID[$app]}" 2>/dev/null || { cat "$TMP/ferry-$app.err" >&2; die "ferry ($app) exited"; }
    sleep 0.1
  done
  [[ -n "$port" ]] || die "ferry ($app) did not start"
  FERRY_PORT[$app]=$port
}

start_fpm_app() {
  local app=$1 dir=${APPDIR[$1]} port sock="$TMP/fpm-$1.sock" fpm_root=() i env_lines
  port=$(free_port)
  case "$app" in
    symfony) env_lines="env[APP_ENV] = prod
env[APP_DEBUG] = 0" ;;
    laravel) env_lines="env[APP_ENV] = production
env[APP_DEBUG] = 0" ;;
  esac
  cat >"$TMP/fpm-$app.conf" <<EOF
[global]
pid = $TMP/fpm-$app.pid
error_log = $TMP/fpm-$app.log
daemonize = no

[$app]
listen = $sock
pm = static
pm.max_children = $WORKERS
$env_lines
EOF
  [[ $(id -u) -eq 0 ]] && fpm_root=(-R)
  php-fpm8.2 -F "${fpm_root[@]}" -y "$TMP/fpm-$app.conf" -p "$TMP" "${OPCACHE_PROD[@]}" >"$TMP/fpm-$app.out" 2>&1 &
  FPM_PID[$app]=$!; PIDS+=("${FPM_PID[$app]}")
  for ((i = 0; i < 100; i++)); do [[ -S "$sock" ]] && break; sleep 0.1; done
  [[ -S "$sock" ]] || { cat "$TMP/fpm-$app.out" "$TMP/fpm-$app.log" >&2; die "php-fpm ($app) did not start"; }
  start_nginx "$app" "$port" "
    root $dir/public;
    location / { try_files \$uri /index.php\$is_args\$args; }
    location = /index.php {
      include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $dir/public/index.php;
      fastcgi_param SCRIPT_NAME /index.php;
      fastcgi_pass unix:$sock;
    }"
  FPM_PORT[$app]=$port
}

# waits until every route answers 200 on both targets, then warms each up (caches, opcache, sessions dir)
warm() {
  local app=$1 port route i code
  for port in "${FERRY_PORT[$app]}" "${FPM_PORT[$app]}"; do
    for route in ${ROUTES[$app]}; do
      route=${route%%:*}
      for ((i = 0; i < 100; i++)); do
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "http://127.0.0.1:$port$route" || true)
        [[ "$code" == 200 ]] && break
        sleep 0.2
      done
      [[ "$code" == 200 ]] || die "$app on port $port: $route answers $code"
      wrk -t1 -c4 -d2s "http://127.0.0.1:$port$route" >/dev/null 2>&1
    done
  done
}

# SESSIONS sessions on each target of $app: one line of cookies per session ("a=1; b=2", what a browser sends
# back) in $TMP/cookies-$app-<target>.txt
session_dir() {
  case "$1" in
    symfony) echo "${APPDIR[$1]}/var/sessions/prod" ;;
    laravel) echo "${APPDIR[$1]}/storage/framework/sessions" ;;
  esac
}

# Removes the sessions a first-visit run made (one per request, thousands): each run then starts with the same
# SESSIONS sessions, and a framework's session garbage collection (Laravel's lottery sweeps the directory on 2 %
# of requests) does not slow the runs that follow more than the ones before.
drop_new_sessions() {
  local app=$1 dir
  dir=$(session_dir "$app")
  [[ -d "$dir" ]] || return 0
  (cd "$dir" && find . -maxdepth 1 -type f -printf '%f\n' | sort | comm -23 - "$TMP/keep-$app.txt" | xargs -r rm -f --)
}

make_sessions() {
  local app=$1 t port file i line dir
  dir=$(session_dir "$app")
  [[ -d "$dir" ]] && find "$dir" -maxdepth 1 -type f -delete # the warm-up's
  for t in ferry fpm; do
    port=${FERRY_PORT[$app]}
    [[ "$t" == fpm ]] && port=${FPM_PORT[$app]}
    file="$TMP/cookies-$app-$t.txt"
    : >"$file"
    for ((i = 0; i < SESSIONS; i++)); do
      line=$(curl -s -D - -o /dev/null --max-time 10 "http://127.0.0.1:$port/" |
        sed -n 's/^[Ss]et-[Cc]ookie: *\([^;]*\).*/\1/p' | tr -d '\r' | paste -sd';' | sed 's/;/; /g')
      [[ -n "$line" ]] || die "$app on $t: / set no cookie"
      echo "$line" >>"$file"
    done
  done
  [[ -d "$dir" ]] || die "$app: no session directory $dir after making sessions"
  (cd "$dir" && find . -maxdepth 1 -type f -printf '%f\n' | sort >"$TMP/keep-$app.txt")
  [[ $(wc -l <"$TMP/keep-$app.txt") -ge "$SESSIONS" ]] || die "$app: fewer session files than sessions made"
  cat >"$TMP/sessions.lua" <<'LUA'
-- each request carries the cookies of the next of the sessions listed in the file given after --
local sessions, i = {}, 0
function init(args)
  for line in io.lines(args[1]) do sessions[#sessions + 1] = line end
  i = math.random(#sessions)
end
function request()
  i = i % #sessions + 1
  return wrk.format(nil, nil, { ["Cookie"] = sessions[i] })
end
LUA
}

# Memory per PHP worker in KiB, "RSS PSS ANON FILE SHMEM". RSS: the mean of the serving processes (Ferry's
# workers, php-fpm's children; not a process that has children of its own: php-fpm's master, Ferry's fork
# template), and its three parts (anonymous: the PHP heap; file: the binary and libraries mapped; shmem:
# opcache's segment). PSS (each shared page divided among the processes that map it: php-fpm's children share
# the master's opcache, CLI workers each have their own unless forked from a template): the PSS of every PHP
# process (with php-fpm's master and Ferry's fork template) divided by WORKERS, what one worker costs.
worker_mem() {
  local root=$1 with_root=$2 pids all p rss=0 anon=0 file=0 shm=0 pss=0 n=0 r a f m
  mapfile -t pids < <(descendants "$root")
  all=("${pids[@]}")
  [[ "$with_root" == 1 ]] && all+=("$root")
  for p in "${pids[@]}"; do
    [[ -n "$(descendants "$p")" ]] && continue # a master or template: counted in PSS only
    read -r r a f m < <(awk '$1 == "VmRSS:" { r = $2 } $1 == "RssAnon:" { a = $2 } $1 == "RssFile:" { f = $2 }
      $1 == "RssShmem:" { m = $2 } END { print r + 0, a + 0, f + 0, m + 0 }' "/proc/$p/status" 2>/dev/null || echo 0 0 0 0)
    rss=$((rss + r)); anon=$((anon + a)); file=$((file + f)); shm=$((shm + m)); n=$((n + 1))
  done
  for p in "${all[@]}"; do
    pss=$((pss + $(awk '$1 == "Pss:" { print $2 }' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0)))
  done
  ((n > 0)) || n=1
  echo "$((rss / n)) $((pss / WORKERS)) $((anon / n)) $((file / n)) $((shm / n))"
}

declare -A RPS P99 PHPUS
IFS=',' read -r -a app_list <<<"$APPS"
for app in "${app_list[@]}"; do
  [[ -d "$ROOT/examples/$app" ]] || die "no examples/$app"
  prepare_app "$app"
  start_ferry_app "$app"
  start_fpm_app "$app"
  warm "$app"
  make_sessions "$app"
  log "$app: Ferry on ${FERRY_PORT[$app]}, nginx + php-fpm on ${FPM_PORT[$app]}"
done
mkdir -p "$RESULTS_DIR/raw"
for ((r = 1; r <= ROUNDS; r++)); do
  for app in "${app_list[@]}"; do
    for route in ${ROUTES[$app]}; do
      order=(ferry fpm)
      ((r % 2 == 0)) && order=(fpm ferry)
      for t in "${order[@]}"; do
        port=${FERRY_PORT[$app]}
        [[ "$t" == fpm ]] && port=${FPM_PORT[$app]}
        raw="$RESULTS_DIR/raw/frameworks-$app-$t-${route//[\/:]/_}-r$r.txt"
        script=()
        [[ "$route" == *:returning ]] && script=(-s "$TMP/sessions.lua")
        log "round $r/$ROUNDS: $app $route on $t"
        wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency "${script[@]}" "http://127.0.0.1:$port${route%%:*}" \
          ${script:+-- "$TMP/cookies-$app-$t.txt"} >"$raw" 2>&1 || die "wrk failed"
        parse_wrk "$raw"
        [[ -z "$W_ERR" ]] || log "$app $route on $t: $W_ERR"
        [[ "$route" == *:first ]] && drop_new_sessions "$app"
        RPS[$app,$route,$t]+="$W_RPS "
        P99[$app,$route,$t]+="$W_P99 "
      done
      # the same route's PHP work alone, in this round (the machine's speed drifts between rounds)
      cookies=-
      [[ "$route" == *:returning ]] && cookies="$TMP/cookies-$app-ferry.txt"
      us=$(php "${OPCACHE_PROD[@]}" "$ROOT/bench/framework_php_time.php" "$app" "${APPDIR[$app]}" "${route%%:*}" \
        "$cookies" 1500 2>"$TMP/php-time.err") || { cat "$TMP/php-time.err" >&2; die "$app $route: framework_php_time.php failed"; }
      PHPUS[$app,$route]+="$us "
      [[ "$route" == *:first ]] && drop_new_sessions "$app"
    done
  done
done

cores=$(nproc)
((cores > WORKERS)) && cores=$WORKERS
table="| app | route | Ferry req/s | Ferry p99 | nginx + php-fpm req/s | php-fpm p99 | Ferry ÷ php-fpm | PHP alone | ceiling |
|---|---|---:|---:|---:|---:|---:|---:|---:|"
for app in "${app_list[@]}"; do
  for route in ${ROUTES[$app]}; do
    # shellcheck disable=SC2086  # the per-round lists are split on purpose
    { fr=$(median ${RPS[$app,$route,ferry]}); fp=$(median ${P99[$app,$route,ferry]});
      pr=$(median ${RPS[$app,$route,fpm]}); pp=$(median ${P99[$app,$route,fpm]}); }
    ratio=$(awk -v a="$fr" -v b="$pr" 'BEGIN { printf "%.2f×", (b > 0 ? a / b : 0) }')
    # shellcheck disable=SC2086
    us=$(median ${PHPUS[$app,$route]})
    ceiling=$(awk -v us="$us" -v b="$pr" -v c="$cores" 'BEGIN { printf "%.2f×", (us > 0 && b > 0 ? c * 1e6 / us / b : 0) }')
    table+="
| $app | ${ROUTE_LABEL[$route]} | $fr | $fp ms | $pr | $pp ms | **$ratio** | $us µs | $ceiling |"
  done
done
notes=""
for app in "${app_list[@]}"; do
  read -r fk fkp fa ff fm <<<"$(worker_mem "${FERRY_PID[$app]}" 0)"
  read -r pk pkp pa pf pm <<<"$(worker_mem "${FPM_PID[$app]}" 1)"
  pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.0f %%", (b > 0 ? 100 * (a - b) / b : 0) }'; }
  notes+="- $app, memory per PHP worker after the runs: RSS Ferry $((fk / 1024)) MiB, php-fpm child $((pk / 1024)) MiB ($(pct "$fk" "$pk")); PSS Ferry $((fkp / 1024)) MiB, php-fpm child $((pkp / 1024)) MiB ($(pct "$fkp" "$pkp")); RSS parts anonymous / file / shmem: Ferry $((fa / 1024)) / $((ff / 1024)) / $((fm / 1024)) MiB, php-fpm child $((pa / 1024)) / $((pf / 1024)) / $((pm / 1024)) MiB
"
done
{
  echo "- ferry: $("$FERRY" --version 2>/dev/null | head -n1), git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "- peers: $(nginx -v 2>&1 | sed 's/^nginx version: //'), php-fpm $(php -r 'echo PHP_VERSION;'); opcache on with validate_timestamps=0 on both; $WORKERS PHP processes each"
  echo "- runs: wrk -t2 -c$CONNS -d${DURATION}s per route and target, $ROUNDS interleaved rounds (the order alternates), medians"
  echo "- PHP alone: the route's mean time per request in one PHP process running Ferry's runner over request frames held in memory (bench/framework_php_time.php: no server, no client, no pipe; median of the rounds); ceiling = $cores cores ÷ that time ÷ php-fpm's req/s, the ratio no server could pass with this PHP work"
  echo "- \`/\` returning visitor: each request carries the cookies of one of $SESSIONS sessions made beforehand (session read and rewritten); first visit: no cookie, every request starts a new session (a new file) on both targets"
} | publish_report "$REPORT" "Frameworks on Ferry and on nginx + php-fpm" "raw wrk output in bench/results/raw/"
