#!/usr/bin/env bash
# Installs the Debian packages Ferry's build and tests need, and unpacks msgpack-cxx's headers into
# third_party/msgpack-cxx/ (see shared design §6). Idempotent, and quiet when everything is there.
#
#   scripts/setup.sh            build + tests
#   scripts/setup.sh --serve    only what building ferry and serving the examples needs (scripts/serve.sh):
#                               no test framework, browser, Node.js or npm packages
#   scripts/setup.sh --bench    also the benchmark-only packages (nginx, php8.2-fpm, wrk, h2load); bench/run.sh
#                               calls this itself
#   scripts/setup.sh --fuzz     also the fuzzing-only packages (clang-14, libfuzzer-14-dev); bench/fuzz.sh
#                               calls this itself (the normal test run replays the corpora with GCC)
#
# It never stops or kills a process: packages are installed with a policy-rc.d that forbids starting
# services, so installing nginx or php-fpm starts nothing (bench/run.sh runs its own as child processes).
# msgpack-cxx: Debian's libmsgpack-cxx-dev depends on Boost 1.74, which conflicts with 1.81, so we
# `apt-get download` it and unpack only its headers; no build directory owns them, so any build
# directory finds them (CMakeLists.txt also accepts a system-wide /usr/include/msgpack.hpp).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: scripts/setup.sh [--serve] [--bench] [--fuzz]   (--serve: only building and serving;"
  echo "       --bench: also nginx, php8.2-fpm, wrk, h2load for the benchmarks; --fuzz: also clang-14, libfuzzer-14-dev)"
}
SERVE_ONLY=0
BENCH=0
FUZZ=0
for arg in "$@"; do
  case "$arg" in
    --serve) SERVE_ONLY=1 ;;
    --bench) BENCH=1 ;;
    --fuzz) FUZZ=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "setup: unknown argument '$arg'" >&2; usage >&2; exit 2 ;;
  esac
done

# Building ferry and serving the examples (scripts/serve.sh installs these alone).
PKGS=(
  build-essential cmake pkg-config git curl ca-certificates
  libboost1.81-dev libyaml-cpp-dev node-llhttp libssl-dev libnghttp2-dev zlib1g-dev libdeflate-dev libbrotli-dev media-types procps
  libhiredis-dev  # websockets.broker: redis (server/src/broker/)
  php8.2-cli php-msgpack php-nyholm-psr7
  # examples/symfony (Ferry\Runtime\Runtime): Symfony 5.4 from Debian
  php-symfony-runtime php-symfony-http-kernel php-symfony-framework-bundle php-symfony-routing
  php-symfony-twig-bundle php-twig php-symfony-security-csrf
  # examples/laravel (php-worker/bin/ferry-laravel): Laravel 8 from Debian, SQLite for its database
  php-laravel-framework php-sqlite3
)
# The tests: GoogleTest, PHPUnit, the end-to-end clients.
TEST_PKGS=(
  libgtest-dev phpunit python3
  python3-prometheus-client  # tests/e2e/test_metrics.py: /metrics checked by the reference parser
  python3-h2 nghttp2-client  # tests/e2e/test_http2.py: raw HTTP/2 frames (the attacks), nghttp and h2load
  python3-brotli  # tests/e2e/test_compression.py: brotli responses decoded piece by piece
  redis-server  # tests/e2e/test_broker.py: a real Redis on a free port, started by the tests (never the service)
  nginx  # tests/e2e/test_cluster.py: examples/cluster/run.sh puts it in front of two nodes
  composer  # tests/e2e/test_install.py: php-worker/composer.json validated and required by an app (offline)
  chromium  # tests/e2e/test_chat.py: the browser playwright-core drives (it downloads none)
)
if [ "$SERVE_ONLY" -eq 0 ]; then
  PKGS+=("${TEST_PKGS[@]}")
  # Node.js and npm for the test clients (ws, playwright-core): the machine's own when it has them.
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || PKGS+=(nodejs npm)
fi
BENCH_PKGS=(nginx php8.2-fpm wrk nghttp2-client)
[ "$BENCH" -eq 1 ] && PKGS+=("${BENCH_PKGS[@]}")
FUZZ_PKGS=(clang-14 libfuzzer-14-dev)
[ "$FUZZ" -eq 1 ] && PKGS+=("${FUZZ_PKGS[@]}")

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# Interrupted: still run the EXIT trap (it restores policy-rc.d and removes temp files).
trap 'exit 130' INT
trap 'exit 143' TERM

# --- services: forbid starting any while we install (Debian's policy-rc.d, exit 101 = "not allowed")
POLICY=/usr/sbin/policy-rc.d
POLICY_SAVED=$POLICY.ferry-setup-saved
policy_restore() {
  if [ -e "$POLICY_SAVED" ] || [ -L "$POLICY_SAVED" ]; then
    $SUDO mv -f "$POLICY_SAVED" "$POLICY"      # the one that was there before us
  else
    $SUDO rm -f "$POLICY"                      # there was none: remove ours
  fi
}
policy_forbid_services() {
  # A backup left by an interrupted earlier run is the original: put it back first.
  if [ -e "$POLICY_SAVED" ] || [ -L "$POLICY_SAVED" ]; then $SUDO mv -f "$POLICY_SAVED" "$POLICY"; fi
  if [ -e "$POLICY" ] || [ -L "$POLICY" ]; then $SUDO mv "$POLICY" "$POLICY_SAVED"; fi
  trap 'policy_restore' EXIT
  printf '#!/bin/sh\n# written by ferry scripts/setup.sh for the duration of an install\nexit 101\n' \
    | $SUDO tee "$POLICY" >/dev/null
  $SUDO chmod 755 "$POLICY"
}

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -q
  policy_forbid_services
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  policy_restore
  trap - EXIT
fi

# --- msgpack-cxx headers -> third_party/msgpack-cxx/include (git-ignored)
MSGPACK=third_party/msgpack-cxx
if [ ! -f "$MSGPACK/include/msgpack.hpp" ]; then
  echo "setup: unpacking msgpack-cxx headers into $MSGPACK/"
  mkdir -p third_party
  tmp=$(mktemp -d third_party/.msgpack-cxx.XXXXXX)
  trap 'rm -rf "$tmp"' EXIT
  ( cd "$tmp" && apt-get download libmsgpack-cxx-dev >/dev/null 2>&1 ) || {
    $SUDO apt-get update -q
    ( cd "$tmp" && apt-get download libmsgpack-cxx-dev )
  }
  deb=$(echo "$tmp"/libmsgpack-cxx-dev_*.deb)
  dpkg-deb -x "$deb" "$tmp/root"
  [ -f "$tmp/root/usr/include/msgpack.hpp" ] || { echo "setup: no msgpack.hpp in $deb" >&2; exit 1; }
  mkdir -p "$tmp/out"
  mv "$tmp/root/usr/include" "$tmp/out/include"
  dpkg-deb -f "$deb" Version >"$tmp/out/VERSION"
  rm -rf "$MSGPACK"
  mv "$tmp/out" "$MSGPACK"                     # appears whole or not at all
  rm -rf "$tmp"
  trap - EXIT
fi
# --- npm packages of the end-to-end clients -> tests/e2e/node/node_modules (git-ignored), as locked
NODE_CLIENTS=tests/e2e/node
if [ "$SERVE_ONLY" -eq 1 ]; then
  : # serving needs none
elif [ ! -f "$NODE_CLIENTS/node_modules/.package-lock.json" ] ||
   [ "$NODE_CLIENTS/package-lock.json" -nt "$NODE_CLIENTS/node_modules/.package-lock.json" ]; then
  echo "setup: npm ci in $NODE_CLIENTS/"
  ( cd "$NODE_CLIENTS" && npm ci --no-audit --no-fund --loglevel=error )
fi
echo "setup: ok"
