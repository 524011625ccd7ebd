#!/usr/bin/env python3
"""Writes the seed corpora of fuzz/corpus/<target>/ (run from anywhere; files are rewritten, regression
cases named crash-*/regress-* are left alone). Each seed starts with the target's parameter bytes (see the
target's comment): mostly 0 (whole input, default limits)."""
import json
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def crc(b):
    return zlib.crc32(b) & 0xFFFFFFFF


def goridge(flags, stream, options, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    head = bytes([0x10 | (3 + len(options)), flags]) + struct.pack("<I", len(payload))
    head += struct.pack("<I", crc(head)) + bytes([stream, 0])
    for o in options:
        head += struct.pack("<I", o)
    return head + payload


def ws_frame(op, payload, fin=True, mask=b"\x37\xfa\x21\x3d", rsv1=False):
    if isinstance(payload, str):
        payload = payload.encode()
    b0 = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | op
    n = len(payload)
    if n < 126:
        h = bytes([b0, 0x80 | n])
    elif n < 65536:
        h = bytes([b0, 0x80 | 126]) + struct.pack(">H", n)
    else:
        h = bytes([b0, 0x80 | 127]) + struct.pack(">Q", n)
    return h + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(payload))


def mp_str(s):
    b = s.encode() if isinstance(s, str) else s
    if len(b) < 32:
        return bytes([0xA0 | len(b)]) + b
    return b"\xd9" + bytes([len(b)]) + b


def mp_map(n):
    return bytes([0x80 | n])


def mp_arr(n):
    return bytes([0x90 | n])


# --- http_request: [piece, limits] + stream --------------------------------------------------------------
GET = "GET /index.php?a=1 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: curl/8\r\nAccept: */*\r\n\r\n"
POST = "POST /form HTTP/1.1\r\nHost: h\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 7\r\n\r\na=1&b=2"
CHUNKED = ("POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
           "5;ext=\"q\"\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n")
put("http_request", "get", b"\0\0" + GET.encode())
put("http_request", "get_pieces", b"\x03\0" + GET.encode())
put("http_request", "pipelined", b"\0\0" + (GET + POST + GET).encode())
put("http_request", "post_length", b"\x05\0" + POST.encode())
put("http_request", "chunked", b"\x01\0" + CHUNKED.encode())
put("http_request", "absolute_form", b"\0\0GET http://example.com:8080/p?q HTTP/1.1\r\nHost: other\r\n\r\n")
put("http_request", "http10", b"\0\0GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
put("http_request", "expect", b"\0\0PUT /x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc")
put("http_request", "upgrade", b"\0\0GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n\x81\x80abcd")
put("http_request", "bare_lf", b"\0\0GET / HTTP/1.1\nHost: h\n\n")
put("http_request", "obs_fold", b"\0\0GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n")
put("http_request", "smuggle_cl_te", b"\0\0POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
put("http_request", "small_limits", b"\0\x01GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa HTTP/1.1\r\nHost: h\r\n\r\n")
put("http_request", "two_hosts", b"\0\0GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")

# --- chunked: [piece, limits] + body -----------------------------------------------------------------------
put("chunked", "simple", b"\0\0" + b"5\r\nhello\r\n0\r\n\r\n")
put("chunked", "ext_quoted", b"\x02\0" + b"3;a=\"q\\\"x\";b=t\r\nabc\r\n0;z\r\n\r\n")
put("chunked", "trailers", b"\x04\0" + b"A\r\n0123456789\r\n0\r\nX-A: 1\r\nX-B: two\r\n\r\n")
put("chunked", "big_size", b"\0\x01" + b"FFFFFFFFFFFFFFFFFFFF\r\n")
put("chunked", "bws", b"\0\0" + b"4 \t;  a = b\r\nwxyz\r\n0\r\n\r\n")
put("chunked", "bare_cr", b"\0\0" + b"4\rwxyz\r\n0\r\n\r\n")

# --- urlencoded: [limits] + body ------------------------------------------------------------------------------
put("urlencoded", "simple", b"\0a=1&b=2&c")
put("urlencoded", "nested", b"\0a[]=1&a[]=2&b[x][y]=3&b[x][]=4&c[5]=five&d.e f=6")
put("urlencoded", "escapes", b"\0na%6De=v%20a+l%zz&%5B%5D=x&a%5Bb%5D=c")
put("urlencoded", "php_rules", b"\0a[b=1&+lead=2&x]y[z]=3&[]=4&a[b]c[d]=5")
put("urlencoded", "limits", b"\x01a[1][2][3][4][5]=deep&" + b"&".join(b"f%d=1" % i for i in range(12)))
put("urlencoded", "list_then_map", b"\x000=a&1=b&x=c")

# --- multipart: [piece, limits] + Content-Type line + body ----------------------------------------------
MP = ("multipart/form-data; boundary=XyZ\n"
      "preamble\r\n--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n"
      "--XyZ\r\nContent-Disposition: form-data; name=\"f[]\"; filename=\"x \\\"y\\\".txt\"\r\n"
      "Content-Type: text/plain\r\n\r\nline one\r\n--XyZnot\r\n--Xy\r\nlast\r\n"
      "--XyZ  \r\nContent-Disposition: form-data; name=empty; filename=\"\"\r\n\r\n\r\n--XyZ--\r\nepilogue")
put("multipart", "form", b"\0\0" + MP.encode())
put("multipart", "form_pieces", b"\x05\0" + MP.encode())
put("multipart", "quoted_boundary", b"\x02\0multipart/form-data; charset=utf-8; boundary=\"a b:c\"\n"
    b"--a b:c\r\nContent-Disposition: form-data; name=\"k[x][y]\"\r\n\r\nv\r\n--a b:c--")
put("multipart", "no_final", b"\0\0multipart/form-data; boundary=B\n--B\r\nContent-Disposition: form-data; name=a\r\n\r\nxx")
put("multipart", "limits", b"\0\x01multipart/form-data; boundary=B\n" +
    b"".join(b"--B\r\nContent-Disposition: form-data; name=f%d\r\n\r\n%d\r\n" % (i, i) for i in range(6)) + b"--B--")

# --- ws_frame: [piece, options] + client frames -------------------------------------------------------------
put("ws_frame", "text", b"\0\0" + ws_frame(1, "Hello"))
put("ws_frame", "fragmented", b"\x03\0" + ws_frame(1, "Hel", fin=False) + ws_frame(9, "p") + ws_frame(0, "lo \xc3\xa9".encode("latin-1")))
put("ws_frame", "binary_16", b"\x07\0" + ws_frame(2, bytes(range(256)) * 2))
put("ws_frame", "close", b"\0\0" + ws_frame(8, b"\x03\xe8bye"))
put("ws_frame", "close_bad_code", b"\0\0" + ws_frame(8, b"\x03\xedx"))
put("ws_frame", "ping_pong", b"\x01\0" + ws_frame(9, "ping") + ws_frame(10, ""))
put("ws_frame", "bad_utf8", b"\0\0" + ws_frame(1, b"\xed\xa0\x80"))
put("ws_frame", "rsv1", b"\0\x01" + ws_frame(1, b"\xff\x00", rsv1=True))
put("ws_frame", "too_big", b"\0\x02" + ws_frame(2, b"x" * 200))
put("ws_frame", "len64", b"\0\0" + bytes([0x82, 0xFF]) + struct.pack(">Q", 1 << 40) + b"mask")
put("ws_frame", "unmasked", b"\0\0\x81\x05Hello")

# --- utf8: [piece] + text ---------------------------------------------------------------------------------------
put("utf8", "ascii", b"\0hello")
put("utf8", "mixed", b"\x02" + "héllo wörld € 𝄞".encode())
put("utf8", "overlong", b"\0\xc0\xaf\xe0\x80\xaf")
put("utf8", "surrogate", b"\x01\xed\xa0\x80\xed\xbf\xbf")
put("utf8", "max", b"\0\xf4\x8f\xbf\xbf\xf4\x90\x80\x80")
put("utf8", "truncated", b"\x03\xe2\x82")

# --- goridge_frame: [options] + frames (the golden frames of docs/protocol.md §5) ---------------------------
golden = [
    "13 09 0c 00 00 00 5f 0c 46 73 00 00 7b 22 70 69 64 22 3a 31 32 33 34 7d",
    "13 01 0c 00 00 00 9e 47 36 43 00 00 7b 22 70 69 64 22 3a 35 36 37 38 7d",
    "13 09 0d 00 00 00 3a 6b fa cb 00 00 7b 22 73 74 6f 70 22 3a 74 72 75 65 7d",
    "13 40 04 00 00 00 88 1e 11 e3 00 00 62 6f 6f 6d",
    "14 00 0d 00 00 00 f3 39 ef db 00 00 0d 00 00 00 7b 22 73 74 6f 70 22 3a 74 72 75 65 7d",
    "13 00 00 00 00 00 96 d1 80 34 02 00",
    "13 00 00 00 00 00 96 d1 80 34 08 00",
]
golden = [bytes.fromhex(g) for g in golden]
for i, g in enumerate(golden):
    put("goridge_frame", "golden%d" % i, b"\0" + g)
put("goridge_frame", "golden_stream", b"\0" + b"".join(golden))
put("goridge_frame", "options", b"\0" + goridge(0x10, 1, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], b"\x81\xa1a\x01"))
put("goridge_frame", "fix_crc", b"\x01" + bytes([0x15, 0x08, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 4, 0, 0, 0]) + b"hello")
put("goridge_frame", "oversize", b"\x02" + goridge(0x08, 0, [], b"x" * 100))
put("goridge_frame", "stdout_noise", b"\0Warning: something\n")

# --- rpc_frame: [options] + frames ------------------------------------------------------------------------------
def rpc(flags, seq, method, body):
    return goridge(flags, 0, [seq, len(method)], method.encode() + body.encode())
put("rpc_frame", "reset", b"\0" + rpc(0x08, 1, "resetter.Reset", "\"http\""))
put("rpc_frame", "two", b"\0" + rpc(0x08, 1, "informer.List", "true") + rpc(0x08, 2, "informer.Workers", "\"http\""))
put("rpc_frame", "error_reply", b"\0" + rpc(0x48, 7, "resetter.Reset", "no such plugin"))
put("rpc_frame", "one_option", b"\0" + goridge(0x08, 0, [1], b"x"))
put("rpc_frame", "bad_len", b"\x01" + goridge(0x08, 0, [1, 99], b"abc"))

# --- static_path: target ------------------------------------------------------------------------------------------
for name, t in [("plain", "/css/site.css"), ("dotdot", "/a/../b"), ("enc_dotdot", "/%2e%2e/etc/passwd"),
                ("enc_slash", "/a%2fb"), ("backslash", "/a\\..\\b"), ("hidden", "/.env"), ("git", "/x/.git/config"),
                ("dir", "/docs/"), ("query", "/a/b.txt?x=../y#frag"), ("absolute", "http://h:1/a/./b//c"),
                ("nul", "/a%00b"), ("bad_escape", "/a%zz"), ("utf8", "/caf%C3%A9.txt"), ("dot_segments", "/./a/./")]:
    put("static_path", name, t)

# --- context: [mode] + response (JSON / msgpack) or request fields ----------------------------------------
put("context", "json_ok", b"\0" + json.dumps({"status": 201, "headers": {"Content-Type": ["text/plain"],
    "Set-Cookie": ["a=1", "b=2"]}}).encode())
put("context", "json_empty", b"\0{}")
put("context", "json_scalars", b'\0{"status":"404","headers":{"X-A":1,"X-B":true,"X-C":null,"X-D":1.5,"X-E":{"1":"a","3":"b"}}}')
put("context", "json_bad", b'\0{"status":[1],"headers":[]}')
put("context", "json_status_big", b'\0{"status":1e300,"headers":{}}')
put("context", "json_escapes", b'\0{"status":200,"headers":{"X-\\u00e9":["\\ud83d\\ude00","\\u0000"]}}')
put("context", "mp_ok", b"\x02" + mp_map(2) + mp_str("status") + b"\xcd\x01\xf4" + mp_str("headers") + mp_map(1)
    + mp_str("Location") + mp_arr(1) + mp_str("/next"))
put("context", "mp_nested", b"\x02" + mp_map(1) + mp_str("headers") + mp_map(1) + mp_str("X") + mp_map(2)
    + b"\x01" + mp_str("a") + b"\x05" + b"\xcb" + struct.pack(">d", 2.5))
put("context", "mp_bin", b"\x02" + mp_map(1) + mp_str("headers") + mp_map(1) + mp_str("X") + b"\xc4\x02\xff\x00")
put("context", "mp_truncated", b"\x02" + mp_map(3) + mp_str("status"))
put("context", "request", b"\x01" + b"\0".join([b"127.0.0.1", b"HTTP/1.1", b"GET", b"http://h/p?q=1",
    b"Content-Type", b"text/html", b"x", b"sid", b"a b", b"q=1", b"attr", b"v"]))
put("context", "request_bad_utf8", b"\x01" + b"\0".join([b"\xff", b"HTTP/1.1", b"G\xc3", b"\xed\xa0\x80",
    b"X-\x01", b"\x7f", b"", b"\"", b"\\", b"\xc3\xa9", b"", b""]))

# --- config: .rr.yaml -------------------------------------------------------------------------------------------
put("config", "minimal", 'version: "3"\nserver:\n  command: "php worker.php"\nhttp:\n  address: 127.0.0.1:8080\n')
put("config", "full", """version: "3"
server:
  command: ["php", "-d", "opcache.enable_cli=1", "worker.php"]
  relay: pipes
http:
  address: 0.0.0.0:${PORT}
  max_request_size: 10
  raw_body: false
  uploads:
    dir: /tmp
    forbid: [".php", ".exe"]
  pool:
    num_workers: 4
    max_jobs: 100
    allocate_timeout: 60s
    destroy_timeout: 60s
    supervisor:
      max_worker_memory: 128
      ttl: 0s
      idle_ttl: 10s
      exec_ttl: 30s
  static:
    dir: public
    forbid: [".php"]
rpc:
  listen: tcp://127.0.0.1:6001
logs:
  mode: production
  level: info
  encoding: json
status:
  address: 127.0.0.1:2114
metrics:
  address: 127.0.0.1:2112
reload:
  interval: 1s
  patterns: [".php"]
  services:
    http:
      dirs: ["."]
      recursive: true
websockets:
  path: /ws
""")
put("config", "env_default", 'version: "${VERSION:-3}"\nserver:\n  command: php w.php\nhttp:\n  address: "${HOST:-127.0.0.1}:${PORT}"\n')
put("config", "bad_values", 'version: "3"\nserver:\n  command: ""\nhttp:\n  address: nope\n  pool:\n    num_workers: -1\n')
put("config", "anchors", 'version: "3"\nx: &a {command: php w.php}\nserver: *a\nunknown_key: 1\n')
put("config", "empty", "")
