#!/usr/bin/env bash
# WebSocket benchmark: Ferry (bench/php/ws_bench.php; relay in the core) against the Node.js `ws` peer and
# the dependency-free PHP stream_select peer of the shared kit (/work/shared/ws-bench), in one run on one
# machine, with the kit's load clients: echo round trip, relay (healthy, one stalled receiver, the floor)
# and memory per idle connection. See bench/README.md.
#
# Knobs (environment):
#   ROUNDS          interleaved rounds; every scenario runs every target once per round (default 3)
#   TARGETS         comma-separated subset of: ferry,node,php (default: all three)
#   SCENARIOS       comma-separated subset of: rtt,relay,relay-slow,relay-floor,conns (default: all)
#   CONNS           idle-connection counts to measure (default 1000,10000,19000; counts above the fd limit
#                   are skipped with a note; the PHP peer only up to PHP_MAX_CONNS)
#   PHP_MAX_CONNS   the PHP select peer's cap (default 1000: select(2) watches fds < 1024 only)
#   RTT_CLIENTS     connections of the echo round trip, one of them timed (default 50)
#   RTT_MESSAGES    timed round trips of 64 bytes (default 10000, after 1000 untimed)
#   RELAY_RECEIVERS receivers of the relay (default 20), RELAY_SIZE bytes per message (default 32768),
#   RELAY_RATE      messages per second (default 30), RELAY_DURATION seconds of sending (default 10)
#   WS_KIT          the kit with peers/ and clients/, or as the first argument: bench/ws.sh /path/to/ws-bench
#                   (default /work/shared/ws-bench; copied to the temp dir). It is not in this repository:
#                   without it the script says so and exits 0 (nothing measured).
#   FERRY_BIN       use this ferry binary instead of building build/ferry
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-3}
TARGETS=${TARGETS:-ferry,node,php}
SCENARIOS=${SCENARIOS:-rtt,relay,relay-slow,relay-floor,conns}
CONNS=${CONNS:-1000,10000,19000}
PHP_MAX_CONNS=${PHP_MAX_CONNS:-1000}
RTT_CLIENTS=${RTT_CLIENTS:-50}
RTT_MESSAGES=${RTT_MESSAGES:-10000}
RELAY_RECEIVERS=${RELAY_RECEIVERS:-20}
RELAY_SIZE=${RELAY_SIZE:-32768}
RELAY_RATE=${RELAY_RATE:-30}
RELAY_DURATION=${RELAY_DURATION:-10}
WS_KIT=${1:-${WS_KIT:-/work/shared/ws-bench}}
WARMUP_CONNS=300
WORKERS=1 # lib.sh's default for pools; Ferry's pools here are set in start_ferry_ws
STAMP=$(date -u '+%Y%m%d-%H%M%S')
RESULTS_DIR="$ROOT/bench/results"
RUN_DIR="$RESULTS_DIR/ws-$STAMP"
CMDLINE="ROUNDS=$ROUNDS TARGETS=$TARGETS SCENARIOS=$SCENARIOS CONNS=$CONNS RTT_CLIENTS=$RTT_CLIENTS RTT_MESSAGES=$RTT_MESSAGES RELAY_RECEIVERS=$RELAY_RECEIVERS RELAY_SIZE=$RELAY_SIZE RELAY_RATE=$RELAY_RATE RELAY_DURATION=$RELAY_DURATION${FERRY_BIN:+ FERRY_BIN=$FERRY_BIN} bench/ws.sh"

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
HELLO=ok # what check_hello waits for: ws_bench.php's HTTP answer

for tool in node php curl awk timeout; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found (run scripts/setup.sh)"
done
for v in ROUNDS PHP_MAX_CONNS RTT_CLIENTS RTT_MESSAGES RELAY_RECEIVERS RELAY_SIZE RELAY_RATE RELAY_DURATION; do
  [[ "${!v}" =~ ^[0-9]+$ && "${!v}" -ge 1 ]] || die "$v must be a positive integer"
done
[[ "$RELAY_SIZE" -ge 16 ]] || die "RELAY_SIZE must be at least 16 (the clients' timestamp and sequence number)"

declare -A WANT=() WANT_S=()
IFS=',' read -r -a _t <<<"$TARGETS"
for t in "${_t[@]}"; do
  case "${t// /}" in
    ferry|node|php) WANT[${t// /}]=1 ;;
    "") ;;
    *) die "unknown target '$t' (known: ferry,node,php)" ;;
  esac
done
ORDER=()
for t in ferry node php; do [[ -n "${WANT[$t]:-}" ]] && ORDER+=("$t"); done
[[ ${#ORDER[@]} -gt 0 ]] || die "TARGETS selects nothing"
IFS=',' read -r -a _s <<<"$SCENARIOS"
for s in "${_s[@]}"; do
  case "${s// /}" in
    rtt|relay|relay-slow|relay-floor|conns) WANT_S[${s// /}]=1 ;;
    "") ;;
    *) die "unknown scenario '$s' (known: rtt,relay,relay-slow,relay-floor,conns)" ;;
  esac
done
SCEN=()
for s in rtt relay relay-slow relay-floor conns; do [[ -n "${WANT_S[$s]:-}" ]] && SCEN+=("$s"); done
[[ ${#SCEN[@]} -gt 0 ]] || die "SCENARIOS selects nothing"
CONN_SIZES=()
IFS=',' read -r -a _c <<<"$CONNS"
for c in "${_c[@]}"; do
  c=${c// /}
  [[ -z "$c" ]] && continue
  [[ "$c" =~ ^[0-9]+$ && "$c" -ge 1 ]] || die "CONNS: '$c' is not a positive integer"
  CONN_SIZES+=("$c")
done

# The idle-connection scenario holds up to 19 000 sockets in the client and as many in the server.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
FD_LIMIT=$(ulimit -n)

mkdir -p "$RUN_DIR/servers"
T_START=$SECONDS

# ---------------------------------------------------------------- the kit
if [[ ! -d "$WS_KIT/peers" || ! -d "$WS_KIT/clients" ]]; then
  echo "bench/ws.sh: skipped: no WebSocket benchmark kit at $WS_KIT (peers/ and clients/, outside this repository);" \
    "give its path: bench/ws.sh /path/to/ws-bench, or WS_KIT=/path/to/ws-bench" >&2
  rm -rf "$RUN_DIR"
  exit 0
fi
KIT="$TMP/ws-bench"
cp -r "$WS_KIT" "$KIT"
chmod -R u+w "$KIT"
if [[ ! -f "$KIT/node_modules/ws/package.json" ]]; then
  if [[ -f "$ROOT/tests/e2e/node/node_modules/ws/package.json" ]]; then
    export NODE_PATH="$ROOT/tests/e2e/node/node_modules"
  else
    log "installing ws in the kit's copy (npm install)"
    (cd "$KIT" && npm install --no-audit --no-fund >"$TMP/npm.log" 2>&1) || { cat "$TMP/npm.log" >&2; die "npm install failed"; }
  fi
fi
WS_VERSION=$(cd "$KIT/clients" && node -e 'console.log(require("ws/package.json").version)' 2>/dev/null || echo '?')

# ---------------------------------------------------------------- servers
ECHO_WS="  path: \"/\"
  pool:
    num_workers: 2"
RELAY_WS="  path: \"/relay\"
  relay: true
  max_queue_bytes: \"1MB\"
  pool:
    num_workers: 1"

# start_ferry_ws NAME WS_YAML: a Ferry with ws_bench.php (1 HTTP worker) and the given `websockets:` body,
# run from the project root; sets S_PID (the ferry process) and S_PORT.
start_ferry_ws() {
  local name=$1 ws=$2 conf="$TMP/$1.yaml" out="$RUN_DIR/servers/$1.out" err="$RUN_DIR/servers/$1.err" pid i port=""
  cat >"$conf" <<EOF
version: "3"
server:
  command: "php -d opcache.enable_cli=1 bench/php/ws_bench.php"
http:
  address: 127.0.0.1:0
  io_threads: 1
  pool:
    num_workers: 1
websockets:
$ws
EOF
  (cd "$ROOT" && exec "$FERRY" serve -c "$conf") >"$out" 2>"$err" &
  pid=$!; PIDS+=("$pid")
  for ((i = 0; i < 150; i++)); do
    port=$(sed -n 's#^listening on http://127\.0\.0\.1:\([0-9]*\).*#\1#p' "$out" | head -n1)
    [[ -n "$port" ]] && break
    running "$pid" || { cat "$err" >&2; die "$name exited during startup"; }
    sleep 0.1
  done
  [[ -n "$port" ]] || { cat "$err" >&2; die "$name did not print 'listening on' within 15 s"; }
  check_hello "$name" "http://127.0.0.1:$port/" "$pid" "$err"
  LOGS[$name]=$err
  S_PID=$pid S_PORT=$port
}

# start_peer NAME node|php: one of the kit's peers on a free port; sets S_PID (the peer process) and S_PORT.
start_peer() {
  local name=$1 kind=$2 log="$RUN_DIR/servers/$1.log" port pid i
  port=$(free_port)
  case "$kind" in
    node) (cd "$KIT/peers" && exec node ws-node.js "$port") >"$log" 2>&1 & ;;
    php) (cd "$KIT/peers" && exec php ws-php-native.php "$port") >"$log" 2>&1 & ;;
  esac
  pid=$!; PIDS+=("$pid")
  for ((i = 0; i < 150; i++)); do
    grep -q 'listening on' "$log" 2>/dev/null && break
    running "$pid" || { cat "$log" >&2; die "$name exited during startup"; }
    sleep 0.1
  done
  grep -q 'listening on' "$log" || { cat "$log" >&2; die "$name did not say 'listening on' within 15 s"; }
  LOGS[$name]=$log
  S_PID=$pid S_PORT=$port
}

# start_target NAME TARGET echo|relay: the server of TARGET for that use (the peers serve both).
start_target() {
  case "$2" in
    ferry) if [[ "$3" == relay ]]; then start_ferry_ws "$1" "$RELAY_WS"; else start_ferry_ws "$1" "$ECHO_WS"; fi ;;
    node|php) start_peer "$1" "$2" ;;
  esac
}

# ---------------------------------------------------------------- clients and figures
declare -A VALS RV NOTES ECHO_URL RELAY_URL RELAY_PID TGT_SERVER
CLIENT_RC=0

# run_client OUT TIMEOUT CLIENT ARGS...: one kit client, bounded by `timeout`; its output (after a first line
# with the command) goes to OUT. Succeeds when it exited 0 and printed its RESULT line.
run_client() {
  local out=$1 secs=$2 js=$3 rc=0
  shift 3
  echo "# node $js $*" >"$out"
  timeout -k 5 "$secs" node "$KIT/clients/$js" "$@" >>"$out" 2>&1 || rc=$?
  CLIENT_RC=$rc
  [[ $rc -eq 0 ]] && grep -q '^RESULT ' "$out"
}

field() {  # file key -> KEY's value on the RESULT line (empty if none)
  awk -v k="$2" '/^RESULT / { for (i = 2; i <= NF; i++) { p = index($i, "="); if (substr($i, 1, p - 1) == k) { print substr($i, p + 1); exit } } }' "$1"
}

rec() {  # key round value: one figure of a round ("n/a" and empty values are not kept)
  local v=$3
  [[ "$v" =~ ^-?[0-9]+(\.[0-9]+)?$ ]] || return 0
  VALS[$1]+="$v "
  RV["$1|$2"]=$v
}

note() {  # scenario target text
  NOTES["$1|$2"]+="$3; "
}

client_failed() {  # scenario target round out
  local why
  why=$(grep -v '^#' "$4" | grep -v '^$' | tail -n 2 | tr '\n' ' ' | cut -c1-240)
  if [[ "$CLIENT_RC" == 124 || "$CLIENT_RC" == 137 ]]; then why="timed out; $why"; fi
  note "$1" "$2" "round $3: client failed (exit $CLIENT_RC): ${why:-no output} (${4#"$ROOT"/})"
}

server_up() {  # scenario target round pid: notes a server that is gone
  running "$4" && return 0
  note "$1" "$2" "round $3: not run, the server (pid $4) has exited (see its log)"
  return 1
}

run_rtt() {  # target round
  local t=$1 r=$2 out="$RUN_DIR/rtt-$1-r$2.txt" bad
  server_up rtt "$t" "$r" "${TGT_SERVER[$t|echo]}" || return 0
  log "round $r/$ROUNDS, rtt, $t: ws-rtt.js --clients $RTT_CLIENTS --messages $RTT_MESSAGES --size 64"
  if run_client "$out" 180 ws-rtt.js --url "${ECHO_URL[$t]}" --clients "$RTT_CLIENTS" --messages "$RTT_MESSAGES" \
    --size 64 --timeout 150; then
    rec "rtt|$t|p50" "$r" "$(field "$out" p50_us)"
    rec "rtt|$t|p99" "$r" "$(field "$out" p99_us)"
    rec "rtt|$t|rate" "$r" "$(field "$out" msgs_per_s)"
  else
    bad=$(field "$out" bad)
    [[ -n "$bad" && "$bad" != 0 ]] && note rtt "$t" "round $r: $bad echoes of the wrong length"
    client_failed rtt "$t" "$r" "$out"
  fi
}

run_relay() {  # scenario target round; scenario: relay, relay-slow or relay-floor
  local s=$1 t=$2 r=$3 out="$RUN_DIR/$1-$2-r$3.txt" args=() v
  server_up "$s" "$t" "$r" "${RELAY_PID[$t]}" || return 0
  case "$s" in
    relay) args=(--receivers "$RELAY_RECEIVERS" --size "$RELAY_SIZE") ;;
    relay-slow) args=(--receivers "$RELAY_RECEIVERS" --size "$RELAY_SIZE" --slow 1) ;;
    relay-floor) args=(--receivers 1 --size 64) ;;
  esac
  args+=(--rate "$RELAY_RATE" --duration "$RELAY_DURATION" --drain 5 --pid "${RELAY_PID[$t]}")
  log "round $r/$ROUNDS, $s, $t: ws-relay.js ${args[*]}"
  if run_client "$out" $((RELAY_DURATION + 100)) ws-relay.js --url "${RELAY_URL[$t]}" "${args[@]}"; then
    rec "$s|$t|p95" "$r" "$(field "$out" normal_avg_p95_ms)"
    rec "$s|$t|p99" "$r" "$(field "$out" normal_avg_p99_ms)"
    rec "$s|$t|maxp99" "$r" "$(field "$out" normal_max_p99_ms)"
    rec "$s|$t|loss" "$r" "$(field "$out" normal_loss)"
    rec "$s|$t|rss" "$r" "$(field "$out" server_rss_growth_kib)"
    rec "$s|$t|slowloss" "$r" "$(field "$out" slow_loss)"
    # the one receiver's p50 (the RESULT line has p95/p99 only): its row in the table above it
    [[ "$s" == relay-floor ]] && rec "$s|$t|p50" "$r" "$(awk '$1 == "0" && $2 == "no" { print $5; exit }' "$out")"
    v=$(field "$out" late_sends)
    [[ -n "$v" && "$v" != 0 ]] && note "$s" "$t" "round $r: $v late sends (the sender fell behind its schedule)"
    v=$(field "$out" normal_loss)
    [[ -n "$v" && "$v" != 0 ]] && note "$s" "$t" "round $r: normal receivers lost $v messages"
  else
    client_failed "$s" "$t" "$r" "$out"
  fi
  return 0
}

run_conns() {  # count target round: a fresh server, WARMUP_CONNS connections and back, then COUNT held
  local n=$1 t=$2 r=$3 name="conns$1-$2-r$3" out="$RUN_DIR/conns$1-$2-r$3.txt" url pid open failed
  start_target "$name" "$t" echo
  pid=$S_PID url="ws://127.0.0.1:$S_PORT/"
  log "round $r/$ROUNDS, conns $n, $t: fresh server, $WARMUP_CONNS warm-up connections, then ws-conns.js --conns $n"
  if ! run_client "$RUN_DIR/conns$n-$t-r$r-warmup.txt" 100 ws-conns.js --url "$url" --conns "$WARMUP_CONNS" \
    --pid "$pid" --settle 0 --hold 0 --timeout 60; then
    client_failed "conns$n" "$t" "$r" "$RUN_DIR/conns$n-$t-r$r-warmup.txt"
    stop_server "$pid"
    return 0
  fi
  sleep 1 # the server drops the warm-up connections
  if run_client "$out" 220 ws-conns.js --url "$url" --conns "$n" --pid "$pid" --hold 0 --timeout 150; then
    open=$(field "$out" open); failed=$(field "$out" failed)
    if [[ "$open" == "$n" && "$failed" == 0 ]]; then
      rec "conns$n|$t|bytes" "$r" "$(field "$out" per_conn_bytes)"
      rec "conns$n|$t|connect" "$r" "$(field "$out" connect_ms)"
    else
      note "conns$n" "$t" "round $r: only $open of $n open, $failed failed: $(grep '^READY' "$out" | grep -o 'errors=.*' | cut -d' ' -f1 | cut -c1-200) (not counted)"
    fi
    [[ "$(field "$out" echoed)" == "$open" ]] || note "conns$n" "$t" "round $r: $(field "$out" echoed) of $open echoes came back"
  else
    client_failed "conns$n" "$t" "$r" "$out"
  fi
  running "$pid" || note "conns$n" "$t" "round $r: the server exited during the measurement (log: ${LOGS[$name]#"$ROOT"/})"
  stop_server "$pid"
}

# ---------------------------------------------------------------- start and check
if [[ -n "${WANT[ferry]:-}" ]]; then
  build_ferry
  # A snapshot: every Ferry of the run (the conns scenario starts fresh ones) is the same binary, even if
  # build/ferry is rebuilt meanwhile.
  FERRY_VERSION=$("$FERRY" version 2>/dev/null || echo '?')
  FERRY_GIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet 2>/dev/null || echo '+dirty')"
  cp "$FERRY" "$TMP/ferry"
  FERRY_SRC=$FERRY FERRY="$TMP/ferry"
fi

need_echo=0 need_relay=0
for s in "${SCEN[@]}"; do
  case "$s" in rtt) need_echo=1 ;; relay*) need_relay=1 ;; esac
done
for t in "${ORDER[@]}"; do
  case "$t" in
    ferry)
      if [[ $need_echo == 1 ]]; then
        log "starting ferry-echo (websockets.path /, 2 workers)"
        start_target ferry-echo ferry echo
        ECHO_URL[ferry]="ws://127.0.0.1:$S_PORT/" TGT_SERVER[ferry|echo]=$S_PID
      fi
      if [[ $need_relay == 1 ]]; then
        log "starting ferry-relay (websockets.path /relay, relay: true, max_queue_bytes 1MB)"
        start_target ferry-relay ferry relay
        RELAY_URL[ferry]="ws://127.0.0.1:$S_PORT/relay" RELAY_PID[ferry]=$S_PID
      fi
      ;;
    node|php)
      if [[ $need_echo == 1 || $need_relay == 1 ]]; then
        log "starting the $t peer"
        start_target "$t" "$t" echo
        ECHO_URL[$t]="ws://127.0.0.1:$S_PORT/" RELAY_URL[$t]="ws://127.0.0.1:$S_PORT/relay"
        RELAY_PID[$t]=$S_PID TGT_SERVER[$t|echo]=$S_PID
      fi
      ;;
  esac
done

# Every target must echo (same length) and relay (every message to every receiver) before anything is measured.
for t in "${ORDER[@]}"; do
  if [[ $need_echo == 1 ]]; then
    run_client "$RUN_DIR/check-echo-$t.txt" 40 ws-rtt.js --url "${ECHO_URL[$t]}" --clients 2 --messages 20 \
      --warmup 0 --timeout 30 || { cat "$RUN_DIR/check-echo-$t.txt" >&2; die "$t does not echo at ${ECHO_URL[$t]}"; }
  fi
  if [[ $need_relay == 1 ]]; then
    run_client "$RUN_DIR/check-relay-$t.txt" 60 ws-relay.js --url "${RELAY_URL[$t]}" --receivers 2 --count 5 \
      --rate 50 --drain 3 || { cat "$RUN_DIR/check-relay-$t.txt" >&2; die "$t does not relay at ${RELAY_URL[$t]}"; }
    [[ "$(field "$RUN_DIR/check-relay-$t.txt" normal_loss)" == 0 ]] \
      || { cat "$RUN_DIR/check-relay-$t.txt" >&2; die "$t lost relayed messages at ${RELAY_URL[$t]}"; }
  fi
done
log "all targets echo and relay; running ${SCEN[*]} on ${ORDER[*]}, $ROUNDS round(s)"

# Which idle-connection counts each target gets (the rest is said once in the notes).
declare -A CONNS_OK
for n in "${CONN_SIZES[@]}"; do
  for t in "${ORDER[@]}"; do
    if ((n + 64 > FD_LIMIT)); then
      note "conns$n" "$t" "skipped: $n connections need more than the fd limit allows (ulimit -n $FD_LIMIT, hard limit; client and server each hold one fd per connection)"
    elif [[ "$t" == php && "$n" -gt "$PHP_MAX_CONNS" ]]; then
      note "conns$n" "$t" "skipped: the PHP select peer refuses connections above $PHP_MAX_CONNS (select(2) watches fds < 1024)"
    else
      CONNS_OK["$n|$t"]=1
    fi
  done
done

# ---------------------------------------------------------------- rounds
# Odd rounds run the targets in the given order, even rounds in reverse (a target's place in a round biases it).
for ((r = 1; r <= ROUNDS; r++)); do
  round_order=("${ORDER[@]}")
  if ((r % 2 == 0)); then
    round_order=()
    for ((i = ${#ORDER[@]} - 1; i >= 0; i--)); do round_order+=("${ORDER[$i]}"); done
  fi
  for s in "${SCEN[@]}"; do
    case "$s" in
      rtt) for t in "${round_order[@]}"; do run_rtt "$t" "$r"; done ;;
      relay*) for t in "${round_order[@]}"; do run_relay "$s" "$t" "$r"; done ;;
      conns)
        for n in "${CONN_SIZES[@]}"; do
          for t in "${round_order[@]}"; do
            [[ -n "${CONNS_OK[$n|$t]:-}" ]] && run_conns "$n" "$t" "$r"
          done
        done
        ;;
    esac
  done
done

# ---------------------------------------------------------------- report
# shellcheck source=bench/ws_report.sh
source "$ROOT/bench/ws_report.sh"
