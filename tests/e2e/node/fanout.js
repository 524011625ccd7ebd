// Many receivers at once, for the broker's tests (tests/e2e/test_broker.py) and bench/cluster.sh:
//   node fanout.js '{"urls":["ws://a/ws?topics=t","ws://b/ws?topics=t"],"per_url":500,"expect":100,
//                    "timeout_ms":30000}'
// Opens per_url connections to each URL (a few at a time), prints {"ev":"ready"} once all are open, then
// counts the text messages each receives. A message "[<tag>-]<seq>:<sent ms>" (seq from 0 for each tag: one
// sender each) is checked for order and its delivery time taken (now - sent, both epoch milliseconds with
// fractions: performance.timeOrigin + performance.now()). When every connection has `expect` messages, or at
// the timeout, prints one summary line and exits:
//   {"ev":"done","conns":1000,"complete":1000,"received":100000,"out_of_order":0,"duplicates":0,
//    "p50_ms":..,"p99_ms":..,"max_ms":..,"errors":[..]}
'use strict';
const WebSocket = require('ws');

const { performance } = require('perf_hooks');
const now = () => performance.timeOrigin + performance.now();
const cfg = JSON.parse(process.argv[2]);
const expect = cfg.expect;
const conns = [];
const latencies = [];
const errors = [];
let outOfOrder = 0, duplicates = 0, received = 0, complete = 0, opened = 0;
const total = cfg.urls.length * cfg.per_url;
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');

let finished = false;
function finish() {
  if (finished) return; // the timeout after completion, or completion after the timeout
  finished = true;
  latencies.sort((a, b) => a - b);
  const q = (p) => latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] : null;
  out({ ev: 'done', conns: total, opened, complete, received, out_of_order: outOfOrder, duplicates,
        p50_ms: q(0.5), p90_ms: q(0.9), p99_ms: q(0.99),
        max_ms: latencies.length ? latencies[latencies.length - 1] : null,
        per_conn_min: conns.reduce((m, c) => Math.min(m, c.count), Infinity), errors: errors.slice(0, 5),
        latencies_ms: cfg.raw ? latencies.map((x) => Math.round(x * 1000) / 1000) : undefined });
  for (const c of conns) c.ws.terminate();
  // Exit once the line is written: a pipe takes a large one in parts, and exit() would cut it.
  process.stdout.write('', () => process.exit(0));
}

function open(url) {
  return new Promise((resolve) => {
    const c = { count: 0, next: new Map(), ws: new WebSocket(url, { perMessageDeflate: false }) };
    conns.push(c);
    c.ws.on('open', () => { opened++; resolve(); });
    c.ws.on('error', (e) => { errors.push(e.message); resolve(); });
    c.ws.on('message', (data, binary) => {
      if (binary) return;
      const text = data.toString();
      const colon = text.indexOf(':');
      const dash = text.indexOf('-');
      const tag = dash >= 0 && dash < colon ? text.slice(0, dash) : '';
      const seq = parseInt(text.slice(dash >= 0 && dash < colon ? dash + 1 : 0, colon), 10);
      const sent = parseFloat(text.slice(colon + 1));
      if (Number.isNaN(seq)) return; // not one of ours
      const next = c.next.get(tag) || 0;
      if (seq < next) duplicates++;
      else if (seq > next) outOfOrder++;
      c.next.set(tag, Math.max(next, seq + 1));
      c.count++;
      received++;
      if (!Number.isNaN(sent)) latencies.push(now() - sent);
      if (c.count === expect && ++complete === total) finish();
    });
  });
}

(async () => {
  const batch = 50;
  const urls = [];
  for (const u of cfg.urls) for (let i = 0; i < cfg.per_url; i++) urls.push(u);
  for (let i = 0; i < urls.length; i += batch) await Promise.all(urls.slice(i, i + batch).map(open));
  out({ ev: 'ready', opened });
  setTimeout(finish, cfg.timeout_ms || 30000);
})();
