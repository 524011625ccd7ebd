#!/usr/bin/env bash
# One command: install what is needed, build, and serve the bundled example app (examples/hello).
# Open http://127.0.0.1:8080/ (FERRY_ADDRESS=host:port to change it). Ctrl-C stops it gracefully.
# Extra arguments go to `ferry serve`, e.g. -o http.pool.num_workers=4.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --serve   # only what building and serving need; scripts/test.sh installs the rest
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFERRY_TESTS=OFF >/dev/null  # test.sh turns them on
cmake --build build --target ferry -j"$(nproc)"
exec build/ferry serve -w examples/hello "$@"
