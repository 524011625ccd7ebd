// A publisher for bench/cluster.py: one WebSocket connection (relay mode: the core publishes what it sends to
// its topics) sending `count` messages at `rate` per second, each "<tag>-<seq>:<epoch ms with fractions>"
// (tests/e2e/node/fanout.js reads them), then {"ev":"sent","count":N,"seconds":S,"late_ms":L} (L: how far
// the last message went out behind its schedule).
//   node sender.js '{"url":"ws://127.0.0.1:8080/ws?topics=bench","count":5000,"rate":1000,"tag":"a"}'
'use strict';
const WebSocket = require('ws');
const { performance } = require('perf_hooks');

const cfg = JSON.parse(process.argv[2]);
const now = () => performance.timeOrigin + performance.now();
const ws = new WebSocket(cfg.url, { perMessageDeflate: false });
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');

ws.on('error', (e) => { out({ ev: 'error', message: e.message }); process.exit(1); });
ws.on('open', () => {
  const start = performance.now();
  let seq = 0;
  let late = 0;
  const tick = () => {
    const due = Math.min(cfg.count, Math.floor(((performance.now() - start) / 1000) * cfg.rate) + 1);
    for (; seq < due; seq++) ws.send(`${cfg.tag || 's'}-${seq}:${now().toFixed(3)}`);
    if (seq < cfg.count) {
      setTimeout(tick, 1); // ~1 ms: a few messages per tick, no core spent spinning
      return;
    }
    late = performance.now() - start - ((cfg.count - 1) / cfg.rate) * 1000;
    const wait = () => (ws.bufferedAmount > 0 ? setTimeout(wait, 5) : finish());
    wait();
  };
  const finish = () => {
    out({ ev: 'sent', count: seq, seconds: (performance.now() - start) / 1000, late_ms: late });
    setTimeout(() => { ws.close(); process.exit(0); }, 200);
  };
  tick();
});
