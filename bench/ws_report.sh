# The report of bench/ws.sh (sourced at its end, with its VALS, RV, ROUNDS and settings): the medians over
# the rounds, the ratios against the peers, the table in the run's directory and bench/results.
# shellcheck shell=bash disable=SC2034,SC2153 # its variables are ws.sh's (checked together: shellcheck -x bench/ws.sh)
cell() {  # key -> the median over the rounds, "(k/N)" when only k rounds gave a figure, "—" when none
  local v k
  [[ -z "${VALS[$1]:-}" ]] && { echo "—"; return; }
  # shellcheck disable=SC2086 # word splitting of the per-round list is intended
  v=$(median ${VALS[$1]})
  k=$(wc -w <<<"${VALS[$1]}")
  if ((k < ROUNDS)); then echo "$v ($k/$ROUNDS rounds)"; else echo "$v"; fi
}

ratio() {  # key_a key_b -> median(a) / median(b), e.g. "0.85×"
  local a b
  [[ -n "${VALS[$1]:-}" && -n "${VALS[$2]:-}" ]] || { echo "—"; return; }
  # shellcheck disable=SC2086 # word splitting of the per-round lists is intended
  { a=$(median ${VALS[$1]}); b=$(median ${VALS[$2]}); }
  awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) printf "%.2f×", a / b; else print "—" }'
}

paired() {  # key_a key_b -> the median of the per-round ratios a_r / b_r (rounds where both have a figure)
  local r list=""
  for ((r = 1; r <= ROUNDS; r++)); do
    [[ -n "${RV[$1|$r]:-}" && -n "${RV[$2|$r]:-}" ]] || continue
    list+="$(awk -v a="${RV[$1|$r]}" -v b="${RV[$2|$r]}" 'BEGIN { if (b > 0) printf "%.4f", a / b }') "
  done
  list=$(echo "$list" | xargs)
  [[ -n "$list" ]] || { echo "—"; return; }
  # shellcheck disable=SC2086
  awk -v m="$(median $list)" 'BEGIN { printf "%.2f×", m }'
}

label() {
  case "$1" in
    ferry) echo "Ferry" ;;
    node) echo "Node ws $WS_VERSION" ;;
    php) echo "PHP native (select)" ;;
  esac
}

KIB_RELAY=$((RELAY_SIZE / 1024))
ROWS=()  # "key-suffix|scenario label|metric label": the table's rows, in order
for s in "${SCEN[@]}"; do
  case "$s" in
    rtt)
      ROWS+=("rtt|p50|echo RTT, $RTT_CLIENTS clients, 64 B × $RTT_MESSAGES|p50 µs"
             "rtt|p99|echo RTT, $RTT_CLIENTS clients, 64 B × $RTT_MESSAGES|p99 µs"
             "rtt|rate|echo RTT, $RTT_CLIENTS clients, 64 B × $RTT_MESSAGES|round trips/s") ;;
    relay|relay-slow)
      if [[ "$s" == relay ]]; then d="relay 1→$RELAY_RECEIVERS, $KIB_RELAY KiB at $RELAY_RATE/s × ${RELAY_DURATION}s, healthy"
      else d="relay 1→$RELAY_RECEIVERS, $KIB_RELAY KiB at $RELAY_RATE/s × ${RELAY_DURATION}s, 1 receiver stalled"; fi
      ROWS+=("$s|p95|$d|normal receivers' avg p95 ms" "$s|p99|$d|normal receivers' avg p99 ms"
             "$s|maxp99|$d|normal receivers' max p99 ms" "$s|loss|$d|normal receivers' loss (msgs)")
      [[ "$s" == relay-slow ]] && ROWS+=("$s|slowloss|$d|stalled receiver's loss (msgs)")
      ROWS+=("$s|rss|$d|server RSS growth KiB (peak − before)") ;;
    relay-floor)
      d="relay floor 1→1, 64 B at $RELAY_RATE/s × ${RELAY_DURATION}s"
      ROWS+=("$s|p50|$d|p50 ms" "$s|p95|$d|p95 ms" "$s|p99|$d|p99 ms" "$s|loss|$d|loss (msgs)") ;;
    conns)
      for n in "${CONN_SIZES[@]}"; do
        d="idle connections: $n (fresh server, $WARMUP_CONNS warm-up, 1 echo each)"
        ROWS+=("conns$n|bytes|$d|server RSS bytes per connection" "conns$n|connect|$d|time to open all, ms")
      done ;;
  esac
done

table=$(
  head="| scenario | figure |" rule="|---|---|"
  for t in "${ORDER[@]}"; do head+=" $(label "$t") |"; rule+="---:|"; done
  both=0; [[ -n "${WANT[ferry]:-}" && -n "${WANT[node]:-}" ]] && both=1
  [[ $both == 1 ]] && { head+=" Ferry ÷ Node |"; rule+="---:|"; }
  echo "$head"; echo "$rule"
  prev=""
  for row in "${ROWS[@]}"; do
    IFS='|' read -r s m d f <<<"$row"
    shown=$d; [[ "$d" == "$prev" ]] && shown=""; prev=$d
    line="| $shown | $f |"
    for t in "${ORDER[@]}"; do line+=" $(cell "$s|$t|$m") |"; done
    [[ $both == 1 ]] && line+=" $(ratio "$s|ferry|$m" "$s|node|$m") |"
    echo "$line"
  done
)

notes=$(
  if [[ -n "${WANT_S[relay-slow]:-}" && -n "${WANT[ferry]:-}" ]]; then
    for o in node php; do
      [[ -n "${WANT[$o]:-}" ]] || continue
      echo "- relay with a stalled receiver, Ferry ÷ $(label "$o"): normal receivers' avg p99 $(ratio "relay-slow|ferry|p99" "relay-slow|$o|p99") (median of per-round ratios $(paired "relay-slow|ferry|p99" "relay-slow|$o|p99")), max p99 $(ratio "relay-slow|ferry|maxp99" "relay-slow|$o|maxp99") (per-round $(paired "relay-slow|ferry|maxp99" "relay-slow|$o|maxp99")), server RSS growth $(ratio "relay-slow|ferry|rss" "relay-slow|$o|rss")"
    done
  fi
  for key in "${!NOTES[@]}"; do echo "$key"; done | sort | while IFS='|' read -r s t; do
    echo "- $s, $t: ${NOTES[$s|$t]%; }"
  done
  for name in "${!LOGS[@]}"; do echo "$name"; done | sort | while read -r name; do
    case "$name" in
      ferry-*|conns*-ferry-*) w=$(grep -E ' (WARN|ERROR) ' "${LOGS[$name]}" | head -n 5 || true) ;;
      *) w=$(grep -v 'listening on' "${LOGS[$name]}" | head -n 5 || true) ;;
    esac
    [[ -n "$w" ]] && printf -- '- %s log (first 5 lines of note):\n    %s\n' "$name" "${w//$'\n'/$'\n    '}"
  done
  true
)

elapsed=$((SECONDS - T_START))
{
  echo "- fd limit: $FD_LIMIT"
  if [[ -n "${WANT[ferry]:-}" ]]; then
    echo "- ferry: ${FERRY_SRC#"$ROOT"/} ($FERRY_VERSION), git $FERRY_GIT at the start of the run, build type $(awk -F= '/^CMAKE_BUILD_TYPE:/ { print $2 }' "$ROOT/build/CMakeCache.txt" 2>/dev/null); worker bench/php/ws_bench.php (php -d opcache.enable_cli=1); echo instance: websockets.path \"/\", 2 websockets workers; relay instance: websockets.path \"/relay\", relay: true, max_queue_bytes 1MB (overflow drop_oldest), 1 worker; 1 event loop"
  fi
  echo "- peers and clients: $WS_KIT (ws $WS_VERSION, node $(node --version), $(php -r 'echo "PHP ", PHP_VERSION;')), peers as shipped (no RELAY_MAX_BUFFERED: unbounded per-client buffers)"
  echo "- medians over $ROUNDS rounds; odd rounds run ${ORDER[*]}, even rounds the reverse; server RSS is the server process's VmRSS (Ferry: the ferry process, its PHP workers excluded), sampled by the clients (--pid)"
  echo "- raw client output and server logs: bench/results/ws-$STAMP/"
} | publish_report "ws-$STAMP/report.md" "WebSocket benchmark (bench/ws.sh)" "raw output and server logs in bench/results/ws-$STAMP/" \
  ", run took $((elapsed / 60)) min $((elapsed % 60)) s" "the Node clients"
log "command: $CMDLINE"
log "run took $((elapsed / 60)) min $((elapsed % 60)) s"
