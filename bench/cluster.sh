#!/usr/bin/env bash
# Publish-to-delivery latency of WebSocket topics across two Ferry nodes through Redis, against one node and
# against Redis's own pub/sub floor, and 10,000 messages per second checked for loss (bench/cluster.py says
# how; bench/README.md has the table). Writes bench/results/cluster-<date>.md.
#   bash bench/cluster.sh [--receivers 1,10,100,1000]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
command -v redis-server >/dev/null 2>&1 || bash scripts/setup.sh >&2
[[ -x build/ferry ]] || { cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build build --target ferry -j"$(nproc)"; }
out="bench/results/cluster-$(date -u '+%Y-%m-%d-%H%M').md"
python3 bench/cluster.py --out "$out" "$@"
echo "bench: wrote $out" >&2
