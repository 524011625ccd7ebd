#!/usr/bin/env bash
# Forms and uploads benchmark: Ferry (the server parses the form and stores the upload, PHP gets the tree
# and a temp file name) against nginx + php-fpm (PHP parses $_POST / $_FILES), in one run on one machine.
# See bench/README.md.
#
# Knobs (environment):
#   DURATION    seconds per measured wrk run of the form POST (default 5)
#   ROUNDS      interleaved rounds; the table shows medians (default 3)
#   WORKERS     PHP workers: Ferry num_workers and php-fpm pm.max_children (default 2)
#   UPLOAD_MIB  size of the uploaded file in MiB (default 200)
#   TARGETS     comma-separated subset of: ferry,fpm (default both)
#   FERRY_BIN   use this ferry binary instead of building build/ferry
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
WORKERS=${WORKERS:-2}
UPLOAD_MIB=${UPLOAD_MIB:-200}
TARGETS=${TARGETS:-ferry,fpm}
RESULTS_DIR="$ROOT/bench/results"
CMDLINE="DURATION=$DURATION ROUNDS=$ROUNDS WORKERS=$WORKERS UPLOAD_MIB=$UPLOAD_MIB TARGETS=$TARGETS bench/forms.sh"

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
bench_prepare wrk curl php awk
for v in DURATION ROUNDS WORKERS UPLOAD_MIB; do
  [[ "${!v}" =~ ^[0-9]+$ && "${!v}" -ge 1 ]] || die "$v must be a positive integer"
done

ORDER=()
IFS=',' read -r -a _t <<<"$TARGETS"
for t in "${_t[@]}"; do
  t=${t// /}
  case "$t" in
    ferry|fpm) ORDER+=("$t") ;;
    "") ;;
    *) die "unknown target '$t' (known: ferry,fpm)" ;;
  esac
done
[[ ${#ORDER[@]} -gt 0 ]] || die "TARGETS selects nothing"

# ---------------------------------------------------------------- the request bodies
# 20 fields as a sign-up form has them: ASCII words, '+' for spaces, a few %-escapes (UTF-8, '&', '=').
FORM_BODY=""
for ((i = 1; i <= 20; i++)); do
  FORM_BODY+="${FORM_BODY:+&}field$(printf %02d "$i")=Value+number+$i+caf%C3%A9+%26+co%3D$i"
done
FORM_EXPECT="20 Value number 20 café & co=20"
cat >"$TMP/form.lua" <<EOF
wrk.method = "POST"
wrk.body = "$FORM_BODY"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
EOF

UPLOAD="$TMP/upload.bin"
UPLOAD_BYTES=$((UPLOAD_MIB * 1024 * 1024))
head -c "$UPLOAD_BYTES" /dev/urandom >"$UPLOAD"
UPLOAD_EXPECT="0 $UPLOAD_BYTES $UPLOAD_BYTES"

# ---------------------------------------------------------------- targets
# Both sides may take the whole upload, and both keep their temp files in $TMP (the same file system).
mkdir -p "$TMP/www" "$TMP/ferry-uploads" "$TMP/fpm-uploads"
cp "$ROOT/bench/php/forms_fpm.php" "$TMP/www/index.php"
MAX_MIB=$((UPLOAD_MIB + 16))
FERRY_HTTP_EXTRA="  max_request_size: $MAX_MIB
  uploads:
    dir: $TMP/ferry-uploads"
FPM_PHP_ARGS=(-d "upload_max_filesize=${MAX_MIB}M" -d "post_max_size=${MAX_MIB}M" -d "upload_tmp_dir=$TMP/fpm-uploads")
NGINX_HTTP_EXTRA="client_max_body_size ${MAX_MIB}m;"

for t in "${ORDER[@]}"; do
  log "starting $t"
  case "$t" in
    ferry) build_ferry; start_ferry ferry "$ROOT/bench/php/forms_ferry.php" "$FERRY" ;;
    fpm) start_fpm ;;
  esac
done

# Every target must give the same answers before anything is measured.
for t in "${ORDER[@]}"; do
  got=$(curl -s --max-time 10 -d "$FORM_BODY" "${URL[$t]}form")
  [[ "$got" == "$FORM_EXPECT" ]] || die "$t: the form answer is '$got', expected '$FORM_EXPECT'"
done
log "both answer the form; benchmarking ${ORDER[*]}"

# ---------------------------------------------------------------- measuring
mkdir -p "$RESULTS_DIR/raw"
declare -A RF1 RF64 PF64 CS CP UP SRSS PRSS SBASE NOTES
for t in "${ORDER[@]}"; do
  wrk -t1 -c4 -d2s -s "$TMP/form.lua" "${URL[$t]}form" >"$RESULTS_DIR/raw/forms-$t-warmup.txt" 2>&1 \
    || die "wrk failed on $t"
  NOTES[$t]=""
done

upload_once() {  # target round -> appends MiB/s and peak RSS figures
  local t=$1 r=$2 spids=() ppids=() out code secs body
  mapfile -t spids < <(group_pids "$t" server)
  mapfile -t ppids < <(group_pids "$t" php)
  SBASE[$t]+="$(sum_status_kib VmRSS "${spids[@]}") "
  reset_peak_rss "${spids[@]}" "${ppids[@]}"
  out=$(curl -s --max-time 300 -o "$TMP/upload.answer" -w '%{http_code} %{time_total}' \
    -F "file=@$UPLOAD;type=application/octet-stream" "${URL[$t]}upload") || die "$t: curl upload failed"
  read -r code secs <<<"$out"
  body=$(cat "$TMP/upload.answer")
  [[ "$code" == 200 && "$body" == "$UPLOAD_EXPECT" ]] \
    || die "$t: upload answered HTTP $code '$body', expected 200 '$UPLOAD_EXPECT'"
  UP[$t]+="$(awk -v m="$UPLOAD_MIB" -v s="$secs" 'BEGIN { printf "%.0f", m / s }') "
  SRSS[$t]+="$(sum_status_kib VmHWM "${spids[@]}") "
  PRSS[$t]+="$(sum_status_kib VmHWM "${ppids[@]}") "
  echo "round $r: $secs s, server peak $(sum_status_kib VmHWM "${spids[@]}") KiB, PHP peak $(sum_status_kib VmHWM "${ppids[@]}") KiB" \
    >>"$RESULTS_DIR/raw/forms-$t-upload.txt"
}

for t in "${ORDER[@]}"; do : >"$RESULTS_DIR/raw/forms-$t-upload.txt"; done
for ((r = 1; r <= ROUNDS; r++)); do
  round_order=("${ORDER[@]}")
  ((r % 2 == 0)) && mapfile -t round_order < <(printf '%s\n' "${ORDER[@]}" | tac)
  for t in "${round_order[@]}"; do
    url="${URL[$t]}form"
    log "round $r/$ROUNDS, $t: form POST, wrk -t1 -c1 and -t2 -c64, ${DURATION}s each"
    wrk -t1 -c1 -d"${DURATION}s" -s "$TMP/form.lua" "$url" >"$RESULTS_DIR/raw/forms-$t-c1-r$r.txt" 2>&1 \
      || die "wrk failed on $t"
    parse_wrk "$RESULTS_DIR/raw/forms-$t-c1-r$r.txt"
    RF1[$t]+="$W_RPS "; NOTES[$t]+=${W_ERR:+round $r c1 $W_ERR}
    s0=$(server_ticks "$t"); p0=$(php_ticks "$t")
    wrk -t2 -c64 -d"${DURATION}s" --latency -s "$TMP/form.lua" "$url" >"$RESULTS_DIR/raw/forms-$t-c64-r$r.txt" 2>&1 \
      || die "wrk failed on $t"
    s1=$(server_ticks "$t"); p1=$(php_ticks "$t")
    parse_wrk "$RESULTS_DIR/raw/forms-$t-c64-r$r.txt"
    CS[$t]+="$(per_request_us $((s1 - s0)) "$W_REQS") "; CP[$t]+="$(per_request_us $((p1 - p0)) "$W_REQS") "
    RF64[$t]+="$W_RPS "; PF64[$t]+="$W_P99 "; NOTES[$t]+=${W_ERR:+round $r c64 $W_ERR}
    log "round $r/$ROUNDS, $t: upload of $UPLOAD_MIB MiB"
    upload_once "$t" "$r"
  done
done

# Both servers must have removed every temp file once the responses were sent.
left=$(find "$TMP/ferry-uploads" "$TMP/fpm-uploads" -type f | wc -l)
[[ "$left" -eq 0 ]] || die "$left temp upload file(s) left behind: $(find "$TMP/ferry-uploads" "$TMP/fpm-uploads" -type f)"

# ---------------------------------------------------------------- report
declare -A M
for t in "${ORDER[@]}"; do
  # shellcheck disable=SC2086 # word splitting of the per-round lists is intended
  { M[$t.f1]=$(median ${RF1[$t]}); M[$t.f64]=$(median ${RF64[$t]}); M[$t.p64]=$(median ${PF64[$t]});
    M[$t.up]=$(median ${UP[$t]}); M[$t.srss]=$(median ${SRSS[$t]}); M[$t.prss]=$(median ${PRSS[$t]});
    M[$t.sbase]=$(median ${SBASE[$t]}); M[$t.cs]=$(median ${CS[$t]}); M[$t.cp]=$(median ${CP[$t]}); }
done
ratio() {  # key target -> target's figure over fpm's
  [[ -n "${M[fpm.$1]:-}" ]] || { echo "n/a"; return; }
  awk -v a="${M[$2.$1]}" -v b="${M[fpm.$1]}" 'BEGIN { if (b > 0) printf "%.2f×", a / b; else print "n/a" }'
}
mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }
label() {
  case "$1" in
    ferry) echo "Ferry, plain API (bench/php/forms_ferry.php)" ;;
    fpm) echo "nginx + php-fpm (static $WORKERS, bench/php/forms_fpm.php)" ;;
  esac
}

table=$(
  echo "| target | form c1 req/s | form c64 req/s | form c64 p99 | form c64 ratio | form CPU µs/req (server / PHP) | upload MiB/s | upload ratio | server RSS before → peak during upload | PHP peak RSS during upload |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for t in "${ORDER[@]}"; do
    printf '| %s | %s | %s | %s ms | %s | %s / %s | %s | %s | %s → %s | %s |\n' "$(label "$t")" "${M[$t.f1]}" \
      "${M[$t.f64]}" "${M[$t.p64]}" "$(ratio f64 "$t")" "${M[$t.cs]}" "${M[$t.cp]}" "${M[$t.up]}" "$(ratio up "$t")" "$(mib "${M[$t.sbase]}")" \
      "$(mib "${M[$t.srss]}")" "$(mib "${M[$t.prss]}")"
  done
)
notes=$(
  for t in "${ORDER[@]}"; do
    [[ -n "${NOTES[$t]}" ]] && echo "- $t: wrk reported ${NOTES[$t]%; }"
  done
  true
)

{
  echo "- ferry: ${FERRY:+$("$FERRY" version 2>/dev/null), }git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet 2>/dev/null || echo '+dirty')"
  echo "- peers: $(nginx -v 2>&1 | sed 's/^nginx version: //'), $(php -r 'echo "PHP ", PHP_VERSION;'), $(wrk -v 2>&1 | head -n1 | awk '{ print $1, $2 }'), $(curl -V | head -n1 | awk '{ print $1, $2 }'); opcache on"
  echo "- form: POST of ${#FORM_BODY} bytes, 20 urlencoded fields with %-escapes; PHP answers the field count and one value; wrk -t1 -c1 and -t2 -c64 (--latency), ${DURATION}s each; CPU µs/req = utime+stime from /proc during the c64 run ÷ requests"
  echo "- upload: one curl -F of a $UPLOAD_MIB MiB random file per round; MiB/s = size ÷ curl's time_total (until the answer); PHP answers error, size and the temp file's size"
  echo "- RSS: server = ferry process / nginx master + worker; PHP = ferry's workers / php-fpm master + children; peak = sum of VmHWM after resetting it (/proc/PID/clear_refs) just before the upload"
  echo "- $ROUNDS interleaved rounds (odd rounds in target order, even reversed); figures are medians; every temp file was removed after the runs"
} | publish_report forms.md "Ferry forms and uploads benchmark" "raw output in bench/results/raw/forms-*"
