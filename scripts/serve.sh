#!/usr/bin/env bash
# One command: install what is needed, build, and serve the bundled example app (examples/hello).
# Open http://127.0.0.1:8080/ (FERRY_ADDRESS=host:port to change it). Ctrl-C stops it gracefully.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh -DFERRY_TESTS=OFF
exec build/ferry serve -w examples/hello "$@"
