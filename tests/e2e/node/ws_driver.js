// A WebSocket client driven over stdin/stdout for the end-to-end tests (tests/e2e/wsclient.py): each input
// line is a JSON command, each output line a JSON event. Uses the `ws` package (npm), a real client.
//   {"cmd":"connect","name":"a","url":"ws://...","protocols":["chat"],"headers":{...},"maxPayload":N}
//   {"cmd":"send","name":"a","data":"text"}  {"cmd":"send","name":"a","b64":"...","binary":true}
//   {"cmd":"send","name":"a","repeat":"x","size":N}   (a message of N bytes of that character)
//   {"cmd":"fragments","name":"a","parts":["ab","c","d"]}   (one text message in fragments)
//   {"cmd":"ping","name":"a","data":"p"}  {"cmd":"close","name":"a","code":1000,"reason":"r"}
//   {"cmd":"pause","name":"a"} / {"cmd":"resume","name":"a"}   (stop / resume reading the socket)
//   {"cmd":"terminate","name":"a"}  (drop the TCP connection)   {"cmd":"exit"}
// Events: open (protocol, headers), message (data or len+sha256, binary), pong, close (code, reason),
// unexpected (status, headers, body: the server refused the upgrade), error (message).
'use strict';
const WebSocket = require('ws');
const crypto = require('crypto');
const readline = require('readline');

const conns = new Map();
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');

function connect(c) {
  const opts = { headers: c.headers || {}, perMessageDeflate: false };
  if (c.maxPayload) opts.maxPayload = c.maxPayload;
  const ws = new WebSocket(c.url, c.protocols || [], opts);
  conns.set(c.name, ws);
  ws.on('upgrade', (res) => { ws._ferryHeaders = res.headers; });
  ws.on('open', () => out({ ev: 'open', name: c.name, protocol: ws.protocol, headers: ws._ferryHeaders || {} }));
  ws.on('message', (data, isBinary) => {
    const buf = Buffer.isBuffer(data) ? data : Buffer.concat(data);
    const e = { ev: 'message', name: c.name, binary: isBinary, len: buf.length, t: Date.now() };
    if (buf.length <= 4096) {
      if (isBinary) e.b64 = buf.toString('base64'); else e.data = buf.toString('utf8');
    } else {
      e.sha256 = crypto.createHash('sha256').update(buf).digest('hex');
    }
    out(e);
  });
  ws.on('pong', (d) => out({ ev: 'pong', name: c.name, data: d.toString() }));
  ws.on('close', (code, reason) => out({ ev: 'close', name: c.name, code, reason: reason.toString() }));
  ws.on('error', (err) => out({ ev: 'error', name: c.name, message: err.message }));
  ws.on('unexpected-response', (req, res) => {
    let body = '';
    res.on('data', (d) => { body += d; });
    res.on('end', () => out({ ev: 'unexpected', name: c.name, status: res.statusCode, headers: res.headers, body }));
  });
}

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  if (!line.trim()) return;
  const c = JSON.parse(line);
  const ws = conns.get(c.name);
  try {
    switch (c.cmd) {
      case 'connect': connect(c); break;
      case 'send': {
        let data;
        if (c.repeat !== undefined) data = Buffer.alloc(c.size, c.repeat);
        else if (c.b64 !== undefined) data = Buffer.from(c.b64, 'base64');
        else data = c.data;
        ws.send(data, { binary: !!c.binary, fin: true }, () => { if (c.ack) out({ ev: 'sent', name: c.name }); });
        break;
      }
      case 'fragments':
        c.parts.forEach((p, i) => ws.send(p, { binary: !!c.binary, fin: i === c.parts.length - 1 }));
        break;
      case 'ping': ws.ping(c.data || ''); break;
      case 'close': ws.close(c.code, c.reason); break;
      case 'pause': ws._socket.pause(); break;
      case 'resume': ws._socket.resume(); break;
      case 'terminate': ws.terminate(); break;
      case 'exit': process.exit(0);
      default: out({ ev: 'error', name: c.name, message: 'unknown command ' + c.cmd });
    }
  } catch (err) {
    out({ ev: 'error', name: c.name, message: 'command failed: ' + err.message });
  }
});
rl.on('close', () => process.exit(0));
