#!/usr/bin/env bash
# Compression benchmark (http.middleware: gzip): what compressing a PHP app's ~20 KiB JSON answer costs in
# requests per second against sending it as it is, on Ferry and, side by side in the same run, on nginx +
# php-fpm with nginx's gzip filter (the same level). The JSON is built per request by the same PHP code on
# both (bench/php/json_payload.php).
#
#   identity   no Accept-Encoding
#   gzip       Accept-Encoding: gzip (Ferry: libdeflate; nginx: zlib), level GZIP_LEVEL
#   br         Accept-Encoding: br (Ferry only: Debian's nginx has no brotli filter), quality BROTLI_QUALITY
#
# Knobs (environment):
#   DURATION        seconds per run (default 5)
#   ROUNDS          interleaved rounds; the table shows medians (default 3)
#   CONNS           wrk connections (default 32)
#   WORKERS         PHP workers (Ferry) and php-fpm children (default 2)
#   LOOPS           Ferry's http.io_threads and nginx's worker_processes (default 2: Ferry's default here)
#   GZIP_LEVEL      1-9 (default 1: both servers' default)
#   BROTLI_QUALITY  0-11 (default 4: Ferry's default)
#   FERRY_BIN       use this ferry binary instead of building build/ferry
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-32}
WORKERS=${WORKERS:-2}
LOOPS=${LOOPS:-2}
GZIP_LEVEL=${GZIP_LEVEL:-1}
BROTLI_QUALITY=${BROTLI_QUALITY:-4}
RESULTS_DIR="$ROOT/bench/results"
CMDLINE="DURATION=$DURATION ROUNDS=$ROUNDS CONNS=$CONNS WORKERS=$WORKERS LOOPS=$LOOPS GZIP_LEVEL=$GZIP_LEVEL BROTLI_QUALITY=$BROTLI_QUALITY bench/compression.sh"

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
bench_prepare wrk curl php awk nginx php-fpm8.2 gzip
for v in DURATION ROUNDS CONNS WORKERS LOOPS GZIP_LEVEL; do
  [[ "${!v}" =~ ^[0-9]+$ && "${!v}" -ge 1 ]] || die "$v must be a positive integer"
done

# ---------------------------------------------------------------- targets
build_ferry
start_ferry ferry "$ROOT/bench/php/json_ferry.php" "$FERRY" "" "  io_threads: $LOOPS
  middleware: [\"gzip\"]
  compression:
    gzip_level: $GZIP_LEVEL
    brotli_quality: $BROTLI_QUALITY"

sed "s#__DIR__ . '/json_payload.php'#'$ROOT/bench/php/json_payload.php'#" "$ROOT/bench/php/json_fpm.php" \
  >"$TMP/www/index.php"
WORKER_PROCESSES=$LOOPS NGINX_HTTP_EXTRA="gzip on;
  gzip_types application/json;
  gzip_min_length 1024;
  gzip_comp_level $GZIP_LEVEL;
  gzip_vary on;" start_fpm
LOGS[nginx]=${LOGS[fpm]}
ORDER=(ferry fpm)

# Both answer the same JSON, and decode to it from gzip, before anything is measured.
want=$(curl -s "${URL[ferry]}json" | sha256sum)
SIZE_identity=$(curl -s "${URL[ferry]}json" | wc -c)
for t in "${ORDER[@]}"; do
  [[ "$(curl -s "${URL[$t]}json" | sha256sum)" == "$want" ]] || die "$t does not answer the same JSON"
  [[ "$(curl -s -H 'Accept-Encoding: gzip' "${URL[$t]}json" | gzip -dc | sha256sum)" == "$want" ]] \
    || die "$t's gzip answer does not decode to the JSON"
  [[ "$(curl -s -D - -o /dev/null -H 'Accept-Encoding: gzip' "${URL[$t]}json" | tr -d '\r' | tr 'A-Z' 'a-z' \
    | grep '^content-encoding:')" == "content-encoding: gzip" ]] || die "$t does not compress with gzip"
  declare "SIZE_gzip_$t=$(curl -s -H 'Accept-Encoding: gzip' "${URL[$t]}json" | wc -c)"
done
[[ "$(curl -s --compressed -H 'Accept-Encoding: br' "${URL[ferry]}json" | sha256sum)" == "$want" ]] \
  || die "ferry's br answer does not decode to the JSON"
SIZE_br_ferry=$(curl -s -H 'Accept-Encoding: br' "${URL[ferry]}json" | wc -c)
log "both answer the same ${SIZE_identity}-byte JSON; benchmarking (${DURATION}s runs, $ROUNDS rounds)"

# ---------------------------------------------------------------- measuring
mkdir -p "$RESULTS_DIR/raw"
declare -A V T
for ((r = 1; r <= ROUNDS; r++)); do
  round_order=("${ORDER[@]}")
  ((r % 2 == 0)) && round_order=(fpm ferry)
  for t in "${round_order[@]}"; do
    cases=(identity gzip); [[ $t == ferry ]] && cases+=(br)
    for c in "${cases[@]}"; do
      hdr=(); [[ $c != identity ]] && hdr=(-H "Accept-Encoding: $c")
      log "round $r/$ROUNDS, $t, $c"
      out="$RESULTS_DIR/raw/compression-$t-$c-r$r.txt"
      t0=$(server_ticks "$t")
      wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency "${hdr[@]}" "${URL[$t]}json" >"$out" 2>&1 || die "wrk failed on $t"
      t1=$(server_ticks "$t")
      parse_wrk "$out"
      [[ -z "$W_ERR" ]] || die "$t $c: $W_ERR (see $out)"
      V[$t.$c]+="$W_RPS "
      T[$t.$c]+="$(per_request_us $((t1 - t0)) "$W_REQS") "
    done
  done
done

# ---------------------------------------------------------------- report
declare -A M C
for k in "${!V[@]}"; do
  # shellcheck disable=SC2086 # word splitting of the per-round lists is intended
  M[$k]=$(median ${V[$k]}); C[$k]=$(median ${T[$k]})
done
cost() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f %%", 100 * (1 - a / b); else print "—" }'; }
paired() {  # "a1 a2 .." "b1 b2 .." -> the lowest and highest cost of round i's a against round i's b
  awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x, " "); split(b, y, " "); lo = 100; hi = -100
    for (i = 1; i <= n; i++) { c = 100 * (1 - x[i] / y[i]); if (c < lo) lo = c; if (c > hi) hi = c }
    printf "%.0f–%.0f %%", lo, hi }'
}
size_of() { local v="SIZE_$1"; echo "${!v:-}"; }
table=$(
  echo "| ~20 KiB JSON from PHP | req/s | cost against identity (medians; round by round) | bytes sent | front end's CPU µs/request | rounds |"
  echo "|---|---:|---:|---:|---:|---|"
  for t in "${ORDER[@]}"; do
    name="Ferry"; [[ $t == fpm ]] && name="nginx + php-fpm"
    for c in identity gzip br; do
      [[ -n "${M[$t.$c]:-}" ]] || continue
      size=$SIZE_identity; [[ $c == gzip ]] && size=$(size_of "gzip_$t"); [[ $c == br ]] && size=$SIZE_br_ferry
      if [[ $c == identity ]]; then cst="—"; else
        cst="$(cost "${M[$t.$c]}" "${M[$t.identity]}"); $(paired "${V[$t.$c]}" "${V[$t.identity]}")"
      fi
      printf '| %s, %s | %s | %s | %s | %s | %s |\n' "$name" "$c" "${M[$t.$c]}" "$cst" "$size" "${C[$t.$c]}" "${V[$t.$c]% }"
    done
  done
  ratio=$(awk -v a="${M[ferry.gzip]}" -v b="${M[fpm.gzip]}" 'BEGIN { printf "%.2f×", a / b }')
  echo "| Ferry ÷ nginx + php-fpm, both gzip | $ratio | | | | |"
)
notes=$(log_warnings)
{
  echo "- ferry: $("$FERRY" version 2>/dev/null), git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet 2>/dev/null || echo '+dirty'), $LOOPS event loops, $WORKERS PHP workers, http.middleware [gzip], gzip_level $GZIP_LEVEL, brotli_quality $BROTLI_QUALITY"
  echo "- nginx: $(nginx -v 2>&1 | sed 's/^nginx version: //'), worker_processes $LOOPS, gzip on (zlib), gzip_comp_level $GZIP_LEVEL; php-fpm pm=static with $WORKERS children, opcache on"
  echo "- wrk -t2 -c$CONNS -d${DURATION}s; $ROUNDS interleaved rounds, medians; front end's CPU: the ferry process (loops) or nginx's master and workers, from /proc ticks"
} | publish_report "compression-$(date -u +%F-%H%M).md" "Ferry compression benchmark (gzip and brotli of a PHP JSON answer)" "raw output in bench/results/raw/compression-*"
