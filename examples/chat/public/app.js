// The chat page: signed out, the login form; signed in (GET /me answers the name), the chat over a WebSocket
// (/chat: one li per line in #messages, reconnecting with exponential back-off) and the feed over server-sent
// events (/feed: one li per event in #feed). No framework; the cookie is HttpOnly, so the page asks /me.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const BACKOFF_FIRST_MS = 1000;
  const BACKOFF_MAX_MS = 5000;

  let ws = null;          // the current WebSocket, null while waiting to reconnect
  let attempt = 0;        // failed connections in a row (the back-off's exponent)
  let retryTimer = null;
  let countdown = null;
  let feed = null;        // the EventSource
  let feedTimer = null;

  function setStatus(text, cls) {
    const s = $('status');
    s.textContent = text;
    s.className = cls;
  }

  function addLine(list, text) {
    const li = document.createElement('li');
    li.textContent = text;   // never innerHTML: messages are user input
    const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
    list.appendChild(li);
    if (atBottom) list.scrollTop = list.scrollHeight;
  }

  // The signed-in name; null when the server says 401; throws when the server cannot be reached or fails.
  async function whoAmI() {
    const r = await fetch('/me', { cache: 'no-store', credentials: 'same-origin' });
    if (r.status === 401) return null;
    if (!r.ok) throw new Error('GET /me: ' + r.status);
    return r.text();
  }

  function showLogin() {
    stopAll();
    $('chat-view').hidden = true;
    $('login-view').hidden = false;
    $('user').textContent = '';
    setStatus('signed out', 'off');
    $('name').focus();
  }

  function showChat(user) {
    $('login-view').hidden = true;
    $('chat-view').hidden = false;
    $('user').textContent = 'signed in as ' + user;
    $('message').focus();
  }

  function clearRetry() {
    clearTimeout(retryTimer);
    clearInterval(countdown);
    retryTimer = countdown = null;
  }

  function stopAll() {
    clearRetry();
    clearTimeout(feedTimer);
    if (ws) { const w = ws; ws = null; w.close(1000); }
    if (feed) { feed.close(); feed = null; }
  }

  // --- the chat: WebSocket /chat ---------------------------------------------------------------------
  function connect() {
    clearRetry();
    setStatus('connecting', 'warn');
    const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/chat';
    const sock = new WebSocket(url);
    ws = sock;
    sock.onopen = () => {
      if (ws !== sock) return;
      attempt = 0;
      setStatus('connected', 'ok');
      $('send').disabled = false;
    };
    sock.onmessage = (ev) => {
      if (typeof ev.data === 'string') addLine($('messages'), ev.data);
    };
    sock.onclose = () => {
      if (ws !== sock) return;   // closed on purpose (signed out)
      ws = null;
      $('send').disabled = true;
      scheduleReconnect();
    };
  }

  async function scheduleReconnect() {
    // A refused upgrade (401: the cookie is no longer valid) looks like any failure to the WebSocket API: ask.
    try {
      if (await whoAmI() === null) { showLogin(); return; }
    } catch (e) { /* the server is away: keep trying */ }
    const delay = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** attempt);
    attempt++;
    const until = Date.now() + delay;
    const tick = () => {
      const s = Math.max(1, Math.ceil((until - Date.now()) / 1000));
      setStatus(`reconnecting in ${s} s`, 'warn');
    };
    tick();
    countdown = setInterval(tick, 250);
    retryTimer = setTimeout(connect, delay);
  }

  function send(ev) {
    ev.preventDefault();
    const input = $('message');
    const text = input.value.trim();
    if (!text || !ws || ws.readyState !== WebSocket.OPEN) return;
    ws.send(text);
    input.value = '';
  }

  // --- the feed: server-sent events /feed ------------------------------------------------------------
  // EventSource reconnects by itself after a dropped stream (with Last-Event-ID: the server replays what was
  // missed); a refused one (401, 503) is closed for good, so it is reopened here after a pause.
  function openFeed() {
    clearTimeout(feedTimer);
    const es = new EventSource('/feed?topic=feed');
    feed = es;
    es.onopen = () => { $('feed-status').textContent = 'live'; };
    es.onmessage = (ev) => addLine($('feed'), ev.data);
    es.onerror = () => {
      if (feed !== es) return;
      $('feed-status').textContent = 'reconnecting';
      if (es.readyState === EventSource.CLOSED) {
        feed = null;
        feedTimer = setTimeout(openFeed, BACKOFF_MAX_MS);
      }
    };
  }

  async function start() {
    let user;
    try {
      user = await whoAmI();
    } catch (e) {
      setStatus('server unavailable', 'off');
      setTimeout(start, BACKOFF_MAX_MS);
      return;
    }
    if (user === null) { showLogin(); return; }
    showChat(user);
    connect();
    openFeed();
  }

  $('send-form').addEventListener('submit', send);
  start();
})();
