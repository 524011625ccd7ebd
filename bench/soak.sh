#!/usr/bin/env bash
# Soak: one ferry under mixed traffic at about half its saturating rate for MINUTES minutes — keep-alive and
# new connections, forms, uploads, raw bodies, static files, WebSocket chat with a stalled receiver, SSE —
# while workers leak (max_worker_memory recycles them), crash now and then (502, counted apart) and a rolling
# reset of both pools runs every minute. A row of figures every minute (ferry's RSS, descriptors, threads,
# temp files, requests, non-2xx, p99, WebSocket and SSE traffic, recycling), then the verdict: RSS and
# descriptors flat after warm-up (within 5 %), no non-2xx but the crashes' 502s, no temp file left.
# Written to bench/results/soak-<date>.md. The driver is bench/soak_mixed.py (its --help lists every knob),
# the traffic bench/soak_traffic.py, the worker bench/php/soak.php.
#
# Knobs (environment):
#   MINUTES     length of the run (default 30)
#   WARMUP      minutes left out of the verdict (default: a sixth of the run, 1 to 5)
#   RATE        paced HTTP requests/s (default 0: half of what GET / saturates at, measured for 5 s first)
#   SOAK_ARGS   more options of bench/soak_mixed.py, e.g. "--workers 2 --chat 10"
#   FERRY_BIN   use this ferry binary instead of building build/ferry
#
# Exit status: 0 every goal met, 2 a goal missed, 1 the server failed.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MINUTES=${MINUTES:-30}
RATE=${RATE:-0}
SOAK_ARGS=${SOAK_ARGS:-}
CMDLINE="MINUTES=$MINUTES${WARMUP:+ WARMUP=$WARMUP} RATE=$RATE${SOAK_ARGS:+ SOAK_ARGS=\"$SOAK_ARGS\"}${FERRY_BIN:+ FERRY_BIN=$FERRY_BIN} bench/soak.sh"

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

for tool in php python3; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found (run scripts/setup.sh)"
done
[[ "$MINUTES" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "MINUTES must be a number of minutes"
[[ "$RATE" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "RATE must be a number of requests per second"
build_ferry

args=(--bin "$FERRY" --minutes "$MINUTES" --rate "$RATE" --tmp "$TMP" --command "$CMDLINE")
[[ -n "${WARMUP:-}" ]] && args+=(--warmup "$WARMUP")
# shellcheck disable=SC2206  # SOAK_ARGS is a list of options, split on purpose
[[ -n "$SOAK_ARGS" ]] && args+=($SOAK_ARGS)
log "soak for $MINUTES minutes (ferry: $FERRY)"
rc=0
python3 "$ROOT/bench/soak_mixed.py" "${args[@]}" &
PIDS+=("$!")
wait "$!" || rc=$?
PIDS=()
exit "$rc"
