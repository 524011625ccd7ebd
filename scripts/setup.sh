#!/usr/bin/env bash
# Installs every Debian package Ferry's build, tests and benchmarks need. Idempotent.
# msgpack-cxx: Debian's libmsgpack-cxx-dev depends on Boost 1.74, which conflicts with 1.81, so we
# `apt-get download` it and unpack the headers into build/_deps (see shared design §6).
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(
  build-essential cmake pkg-config git curl ca-certificates
  libboost1.81-dev libyaml-cpp-dev node-llhttp libgtest-dev
  php8.2-cli php-msgpack phpunit php-nyholm-psr7
  python3 nginx php8.2-fpm wrk procps
)

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# nginx/php-fpm are only for benchmarks: never leave them running as services.
if command -v systemctl >/dev/null 2>&1; then :; fi
pkill -x nginx 2>/dev/null || true
pkill -f 'php-fpm: master' 2>/dev/null || true

DEPS=build/_deps
if [ ! -f "$DEPS/msgpack/usr/include/msgpack.hpp" ]; then
  mkdir -p "$DEPS/msgpack"
  tmp=$(mktemp -d)
  ( cd "$tmp" && apt-get download libmsgpack-cxx-dev >/dev/null 2>&1 ) || {
    $SUDO apt-get update -q
    ( cd "$tmp" && apt-get download libmsgpack-cxx-dev )
  }
  dpkg-deb -x "$tmp"/libmsgpack-cxx-dev_*.deb "$DEPS/msgpack"
  rm -rf "$tmp"
fi
echo "setup: ok"
