#!/usr/bin/env bash
# Instructions per request of the ferry process (callgrind), with and without an optional config part:
# a measure that the host's noise does not move (bench/README.md, "Reading the results").
#   bench/instructions.sh                      hello world, base config vs base + supervisor limits + /metrics
# Knobs: REQUESTS (default 4000, after 500 of warm-up), CONCURRENCY (default 8), FERRY_BIN.
# Prints "base: N instr/request", "with: M instr/request" and the ratio. Needs valgrind.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FERRY=${FERRY_BIN:-$ROOT/build/ferry}
REQUESTS=${REQUESTS:-4000}
CONCURRENCY=${CONCURRENCY:-8}
command -v valgrind >/dev/null || { echo "valgrind not found" >&2; exit 1; }
TMP=$(mktemp -d /tmp/ferry-instr-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT

# n GET / on `concurrency` keep-alive connections, each answer checked.
cat >"$TMP/client.py" <<'PY'
import http.client, sys, threading
port, n, c = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def run(k):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for _ in range(k):
        conn.request("GET", "/"); r = conn.getresponse(); r.read(); assert r.status == 200
ts = [threading.Thread(target=run, args=(n // c,)) for _ in range(c)]
[t.start() for t in ts]; [t.join() for t in ts]
PY

measure() {  # name extra-yaml -> instructions per request
  local name=$1 extra=$2 port pid
  cat >"$TMP/$name.yaml" <<YAML
version: "3"
server:
  command: "php -d opcache.enable_cli=1 $ROOT/tests/php/hello.php"
http:
  address: 127.0.0.1:0
  io_threads: 1
  pool:
    num_workers: 2
$extra
YAML
  : >"$TMP/$name.stdout" # there before the first look below (the background job opens it a moment later)
  valgrind --tool=callgrind --callgrind-out-file="$TMP/$name.out" --instr-atstart=no \
    "$FERRY" serve -c "$TMP/$name.yaml" >"$TMP/$name.stdout" 2>"$TMP/$name.stderr" &
  pid=$!
  for _ in $(seq 1 600); do
    port=$(sed -n 's#^listening on http://127\.0\.0\.1:\([0-9]*\).*#\1#p' "$TMP/$name.stdout" | head -n1)
    [[ -n "$port" ]] && break
    sleep 0.1
  done
  [[ -n "$port" ]] || { cat "$TMP/$name.stderr" >&2; exit 1; }
  python3 "$TMP/client.py" "$port" 500 "$CONCURRENCY"
  callgrind_control -i on "$pid" >/dev/null # the requests below only: startup and warm-up are not counted
  python3 "$TMP/client.py" "$port" "$REQUESTS" "$CONCURRENCY"
  callgrind_control -i off "$pid" >/dev/null
  kill -TERM "$pid"; wait "$pid" || true
  local ir
  ir=$(awk '/^totals:/ { s += $2 } END { print s + 0 }' "$TMP/$name.out")
  [[ -n "$ir" && "$ir" -gt 0 ]] || { echo "no instruction count in $TMP/$name.out" >&2; exit 1; }
  awk -v ir="$ir" -v n="$REQUESTS" 'BEGIN { printf "%.0f", ir / n }'
}

base=$(measure base "")
with=$(measure with "    supervisor:
      watch_tick: 1s
      ttl: 1h
      idle_ttl: 1h
      max_worker_memory: 512
      exec_ttl: 60s
metrics:
  address: 127.0.0.1:0")
echo "base (hello world): $base instr/request"
echo "with supervisor limits + /metrics: $with instr/request"
awk -v a="$with" -v b="$base" 'BEGIN { printf "ratio: %.4f× (%+.2f %%)\n", a / b, (a / b - 1) * 100 }'
