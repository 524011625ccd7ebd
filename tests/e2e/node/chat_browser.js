// The chat example (examples/chat) in a real browser: Debian's chromium driven by playwright-core (which never
// downloads a browser). Two browser contexts (each a fresh profile with its own cookies) sign in as alice and
// bob, chat both ways and read the feed.
//
//   node chat_browser.js http://127.0.0.1:PORT [--reconnect]
//   node chat_browser.js https://127.0.0.1:PORT     (the test's own certificate: taken without checking;
//                                                    the page then speaks wss:// and the feed over TLS)
//   node chat_browser.js http://127.0.0.1:PORT1 --bob=http://127.0.0.1:PORT2
//                                                   (bob on another node of a cluster: examples/cluster)
//
// With --reconnect the server must drop alice's WebSocket when asked: the script prints
// {"need":"drop","id":"<connection id>"} and waits for a line "dropped" on stdin (tests/e2e/test_chat.py closes
// the connection over the RPC listener), then checks "reconnecting in N s", the reconnection and the chat after it.
// The last stdout line is the result: {"result":"ok",...} with exit code 0, or {"result":"fail","error":...}
// with exit code 1. Everything is bounded by a global timeout of 60 s.
'use strict';

const readline = require('readline');

const GLOBAL_TIMEOUT_MS = 60000;
const WAIT_MS = 15000;
const CHROMIUM = '/usr/bin/chromium';

const argv = process.argv.slice(2);
const base = (argv.find((a) => !a.startsWith('--')) || '').replace(/\/$/, '');
const withReconnect = argv.includes('--reconnect');
const bobBase = ((argv.find((a) => a.startsWith('--bob=')) || '').slice(6) || base).replace(/\/$/, '');

let browser = null;
let step = 'start';
let finished = false;
const pageErrors = [];
const consoleLines = [];
const detail = {};

const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');

async function finish(ok, error) {
  if (finished) return;
  finished = true;
  clearTimeout(globalTimer);
  const b = browser;
  browser = null;
  if (b) await Promise.race([b.close().catch(() => {}), new Promise((r) => setTimeout(r, 5000))]);
  if (ok) {
    out({ result: 'ok', detail });
  } else {
    out({ result: 'fail', step, error, pageErrors, console: consoleLines.slice(-20), detail });
  }
  process.exit(ok ? 0 : 1);
}

const globalTimer = setTimeout(() => {
  finish(false, `global timeout (${GLOBAL_TIMEOUT_MS / 1000} s) during step "${step}"`);
}, GLOBAL_TIMEOUT_MS);

// stdin lines, for the --reconnect hand-shake with the test runner
const stdinLines = [];
const stdinWaiters = [];
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const w = stdinWaiters.shift();
  if (w) w(line.trim()); else stdinLines.push(line.trim());
});
function nextStdinLine() {
  if (stdinLines.length) return Promise.resolve(stdinLines.shift());
  return new Promise((resolve) => stdinWaiters.push(resolve));
}

async function texts(page, selector) {
  return page.$$eval(selector, (els) => els.map((e) => e.textContent));
}

// Waits until #status reads `text` (or matches a RegExp source with a `re:` prefix).
async function waitStatus(page, want, who) {
  try {
    await page.waitForFunction((w) => {
      const t = document.querySelector('#status')?.textContent || '';
      return w.startsWith('re:') ? new RegExp(w.slice(3)).test(t) : t === w;
    }, want, { timeout: WAIT_MS, polling: 50 });
  } catch (e) {
    const now = await page.textContent('#status').catch(() => '?');
    throw new Error(`${who}: #status never became "${want}" within ${WAIT_MS / 1000} s (it reads "${now}")`);
  }
}

// Waits until a list (#messages, #feed) has an li whose text is exactly `line`.
async function waitLine(page, list, line, who) {
  try {
    await page.waitForFunction(([sel, l]) => [...document.querySelectorAll(sel + ' > li')]
      .some((li) => li.textContent === l), [list, line], { timeout: WAIT_MS, polling: 50 });
  } catch (e) {
    const seen = await texts(page, list + ' > li').catch(() => []);
    throw new Error(`${who}: ${list} never showed "${line}" within ${WAIT_MS / 1000} s (it has ${JSON.stringify(seen)})`);
  }
}

async function signIn(context, name, url = base) {
  const page = await context.newPage();
  page.on('pageerror', (err) => pageErrors.push(`${name}: ${err.message}`));
  page.on('console', (msg) => consoleLines.push(`${name} ${msg.type()}: ${msg.text()}`));
  step = `${name}: open the page`;
  const resp = await page.goto(url + '/', { timeout: WAIT_MS });
  if (!resp || resp.status() !== 200) throw new Error(`${name}: GET / answered ${resp && resp.status()}`);
  step = `${name}: the login form`;
  await page.waitForSelector('#name', { state: 'visible', timeout: WAIT_MS });
  await page.fill('#name', name);
  await Promise.all([
    page.waitForNavigation({ timeout: WAIT_MS }),
    page.click('#login'),
  ]);
  step = `${name}: the WebSocket`;
  await waitStatus(page, 'connected', name);
  step = `${name}: the feed`;
  await waitLine(page, '#feed', `${name} joined`, name);
  const cookies = await context.cookies();
  const c = cookies.find((k) => k.name === 'chat_user');
  if (!c || !c.httpOnly || c.sameSite !== 'Lax' || !c.value.startsWith(name + '.')) {
    throw new Error(`${name}: the chat_user cookie is not as expected: ${JSON.stringify(c)}`);
  }
  return page;
}

async function say(page, text) {
  await page.fill('#message', text);
  await page.click('#send');
}

async function main() {
  if (!/^https?:\/\//.test(base)) throw new Error('usage: node chat_browser.js http(s)://HOST:PORT [--reconnect]');
  step = 'load playwright-core';
  let chromium;
  try {
    ({ chromium } = require('playwright-core'));
  } catch (e) {
    throw new Error('playwright-core is missing in tests/e2e/node/node_modules (run scripts/setup.sh): ' + e.message);
  }
  step = 'launch chromium';
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    timeout: 30000,
  });
  detail.browser = browser.version();
  // Two contexts: two fresh profiles, each with its own cookie jar.
  const contextOptions = base.startsWith('https://') ? { ignoreHTTPSErrors: true } : {};
  const alice = await signIn(await browser.newContext(contextOptions), 'alice');
  const bob = await signIn(await browser.newContext(contextOptions), 'bob', bobBase);
  detail.secure = await alice.evaluate(() => window.isSecureContext && location.protocol === 'https:');
  // The page's own protocol ("h2" over https: ALPN), and the feed's, an EventSource on the same connection.
  detail.protocols = await alice.evaluate(() => performance.getEntries()
    .filter((e) => e.nextHopProtocol).map((e) => new URL(e.name).pathname + ' ' + e.nextHopProtocol));

  step = 'the feeds';
  await waitLine(alice, '#feed', 'bob joined', 'alice');
  await waitLine(bob, '#feed', 'bob joined', 'bob');

  step = 'alice writes';
  await say(alice, '  hello from alice  ');
  await waitLine(bob, '#messages', 'alice: hello from alice', 'bob');
  await waitLine(alice, '#messages', 'alice: hello from alice', 'alice');
  step = 'bob answers';
  await say(bob, 'hi alice, bob here');
  await waitLine(alice, '#messages', 'bob: hi alice, bob here', 'alice');
  await waitLine(bob, '#messages', 'bob: hi alice, bob here', 'bob');

  step = 'markup is text';
  const markup = '<img src=x onerror="window.pwned=1"><b>bold</b>';
  await say(bob, markup);
  await waitLine(alice, '#messages', 'bob: ' + markup, 'alice');
  const injected = await alice.evaluate(() => window.pwned === 1 || !!document.querySelector('#messages img, #messages b'));
  if (injected) throw new Error('alice: a message was rendered as HTML');

  if (withReconnect) {
    step = 'reconnect: alice\'s connection id';
    const welcome = (await texts(alice, '#messages > li')).find((t) => t.startsWith('welcome, alice '));
    const m = /\(connection ([^)]+)\)$/.exec(welcome || '');
    if (!m) throw new Error(`alice: no welcome line with a connection id in #messages (got ${JSON.stringify(welcome)})`);
    detail.droppedConnection = m[1];
    step = 'reconnect: the server drops alice';
    out({ need: 'drop', id: m[1] });
    const answer = await nextStdinLine();
    if (answer !== 'dropped') throw new Error(`the test runner answered "${answer}" instead of "dropped"`);
    await waitStatus(alice, 're:^reconnecting in [1-5] s$', 'alice');
    detail.reconnectStatus = await alice.textContent('#status');
    step = 'reconnect: alice is back';
    await waitStatus(alice, 'connected', 'alice');
    await waitLine(bob, '#feed', 'alice left', 'bob');
    await say(alice, 'back again');
    await waitLine(bob, '#messages', 'alice: back again', 'bob');
    await waitLine(alice, '#messages', 'alice: back again', 'alice');
    const welcomes = (await texts(alice, '#messages > li')).filter((t) => t.startsWith('welcome, alice '));
    if (welcomes.length !== 2) throw new Error(`alice: expected 2 welcome lines, got ${JSON.stringify(welcomes)}`);
  }

  step = 'done';
  detail.alice = { messages: await texts(alice, '#messages > li'), feed: await texts(alice, '#feed > li') };
  detail.bob = { messages: await texts(bob, '#messages > li'), feed: await texts(bob, '#feed > li') };
  if (pageErrors.length) throw new Error('uncaught errors in the page: ' + pageErrors.join('; '));
}

main().then(() => finish(true), (err) => finish(false, err && err.message ? err.message : String(err)));
