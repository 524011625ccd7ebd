#!/usr/bin/env bash
# Two Ferry nodes running examples/chat, Redis between them (websockets.broker: redis), nginx in front as the
# load balancer — all on loopback, started and stopped together (README.md here).
#
#   bash examples/cluster/run.sh          # then open http://127.0.0.1:8090/ in two browsers; Ctrl-C stops all
#
# Ports: CLUSTER_PORT (nginx, 8090), NODE1_PORT (8091), NODE2_PORT (8092), REDIS_PORT (6390); the nodes' RPC
# listeners on NODE1_PORT+1000 and NODE2_PORT+1000. FERRY: the binary (build/ferry; scripts/serve.sh builds it).
# CHAT_SECRET: the cookie key, the same on both nodes (a user signed in on one is known on the other).
# Prints "cluster: ready ..." once everything answers; exits when any part exits, stopping the others.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
FERRY=${FERRY:-$ROOT/build/ferry}
CLUSTER_PORT=${CLUSTER_PORT:-8090}
NODE1_PORT=${NODE1_PORT:-8091}
NODE2_PORT=${NODE2_PORT:-8092}
REDIS_PORT=${REDIS_PORT:-6390}
export CHAT_SECRET=${CHAT_SECRET:-ferry-cluster-dev-secret}

for tool in redis-server nginx; do
  command -v "$tool" >/dev/null 2>&1 || { echo "cluster: $tool is not installed (scripts/setup.sh installs it)" >&2; exit 1; }
done
[[ -x $FERRY ]] || { echo "cluster: $FERRY is missing (bash scripts/serve.sh builds it)" >&2; exit 1; }

TMP=$(mktemp -d /tmp/ferry-cluster.XXXXXX)
PIDS=()
stop() {
  trap - EXIT INT TERM
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$TMP"
  echo "cluster: stopped"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_for PORT WHAT: until something accepts on 127.0.0.1:PORT (10 s)
wait_for() {
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "cluster: $2 is not answering on 127.0.0.1:$1 (logs in $TMP)" >&2
  exit 1
}

redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
  --dir "$TMP" --logfile "$TMP/redis.log" &
PIDS+=($!)
wait_for "$REDIS_PORT" redis-server

for n in 1 2; do
  port_var=NODE${n}_PORT
  port=${!port_var}
  "$FERRY" serve -w examples/chat -c .rr.yaml \
    -o "http.address=127.0.0.1:$port" -o "rpc.listen=tcp://127.0.0.1:$((port + 1000))" \
    -o websockets.broker.driver=redis -o "websockets.broker.addrs=127.0.0.1:$REDIS_PORT" \
    -o "websockets.broker.node=node-$n" >"$TMP/node-$n.out" 2>"$TMP/node-$n.log" &
  PIDS+=($!)
done
wait_for "$NODE1_PORT" "node-1 (ferry)"
wait_for "$NODE2_PORT" "node-2 (ferry)"

mkdir -p "$TMP/nginx/tmp" "$TMP/nginx/logs"
user_line=""
[[ $(id -u) -eq 0 ]] && user_line="user root;"   # its workers read nothing of ours, but keep them able to
sed -e "s|@PORT@|$CLUSTER_PORT|; s|@NODE1@|$NODE1_PORT|; s|@NODE2@|$NODE2_PORT|; s|@DIR@|$TMP/nginx|g" \
  -e "s|@USER@|$user_line|" examples/cluster/nginx.conf >"$TMP/nginx/nginx.conf"
nginx -p "$TMP/nginx" -e "$TMP/nginx/logs/error.log" -c "$TMP/nginx/nginx.conf" &
PIDS+=($!)
wait_for "$CLUSTER_PORT" nginx

echo "cluster: ready on http://127.0.0.1:$CLUSTER_PORT/ (nginx) -> node-1 http://127.0.0.1:$NODE1_PORT/," \
  "node-2 http://127.0.0.1:$NODE2_PORT/; redis 127.0.0.1:$REDIS_PORT; logs in $TMP"
# Until any part ends (or Ctrl-C): then the trap stops the others.
wait -n "${PIDS[@]}" || true
echo "cluster: a process ended; stopping the others" >&2
