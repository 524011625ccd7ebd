"""Malformed and hostile requests (issue 5): request smuggling, bare CR/LF, obs-fold, control bytes, odd
versions and targets, over-long lines, Content-Length / Transfer-Encoding games, chunk framing, Host.

Every case asserts
  - the exact status (or statuses, for a pipeline) the server answers;
  - that the connection is closed after any 4xx/5xx the server produces, with nothing more sent;
  - from the worker's request log (tests/php/reqlog.php writes one "METHOD PATH" line per request it
    receives), exactly which requests reached PHP: none for a rejected request, one for an accepted one,
    and never the `/smuggled` request that most vectors carry in their bytes. Nothing is proven by
    sleeping: a connection the server closed after its answers parses nothing more (a request it had parsed
    would have been answered first, in order), and on one it left open the test sends a sentinel request:
    a smuggled request would be answered before the sentinel, and PHP logged it before answering. Only a
    connection whose parser still waits for bytes (the sentinel is taken as the rest of a request) has
    SENTINEL_WAIT seconds to answer, then counts as open with nothing more sent.

One server for the class: 2 workers, max_request_size 1 MB, max_header_size 8 KB, max_request_line 1 KB.
The read timeouts are short (2 s) so that a server still waiting for bytes answers 408 quickly; where the
answer must come "at once" (before the rest of the request is sent), the test also checks it came in under
AT_ONCE seconds.
"""

import json
import os
import re
import socket
import tempfile
import time
import unittest

from harness import Reader, ServerTestCase
from malformed_cases import CASES, uri_is

CLOSE_WAIT = 2.0   # seconds the server gets to close the connection after an error answer (returns at once)
SENTINEL_WAIT = 1.0  # seconds for the sentinel's answer on a connection left open (see above)
READ_TIMEOUT = 5.0 # per response (the server's own read timeouts are 2 s)
AT_ONCE = 1.0      # "at once": well before the server's 2 s read timeouts

SENTINEL = b"GET /sentinel HTTP/1.1\r\nHost: a\r\n\r\n"


class Outcome:
    """What one exchange produced."""

    def __init__(self):
        self.responses = []
        self.error = None      # why fewer responses than expected were read
        self.closed = None     # True: EOF or reset after the responses; False: still open
        self.extra = b""       # bytes received after the expected responses
        self.log = []          # lines PHP logged during the exchange (the sentinel's left out)
        self.elapsed = None    # seconds from sending to the first response

    def statuses(self):
        return [r.status for r in self.responses]

    def json(self, i=0):
        return json.loads(self.responses[i].body)

    def brief(self):
        return [(r.status, r.body[:80]) for r in self.responses]


def log_matches(lines, expected):
    if len(lines) != len(expected):
        return False
    for line, want in zip(lines, expected):
        if isinstance(want, re.Pattern):
            if not want.fullmatch(line):
                return False
        elif line != want:
            return False
    return True


class MalformedTest(ServerTestCase):
    SCRIPT = "reqlog.php"
    CONFIG = {"http": {
        "max_request_size": 1,  # MB
        "limits": {"max_header_size": "8KB", "max_request_line": "1KB"},
        "timeouts": {"read_header": "2s", "read_body": "2s", "idle": "10s"},
        "pool": {"num_workers": 2},
    }}

    @classmethod
    def setUpClass(cls):
        cls._logdir = tempfile.TemporaryDirectory(prefix="ferry-reqlog-")
        cls.reqlog = os.path.join(cls._logdir.name, "requests.log")
        open(cls.reqlog, "wb").close()
        cls.ENV = {"FERRY_TEST_REQLOG": cls.reqlog}
        try:
            super().setUpClass()
        except BaseException:
            cls._logdir.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls._logdir.cleanup()

    # -- machinery --------------------------------------------------------------------------

    def log_lines(self):
        with open(self.reqlog, "rb") as f:
            return f.read().decode("latin-1").splitlines()

    @staticmethod
    def _drain(rd, wait):
        """(closed, extra bytes) seen within `wait` seconds: stops at EOF or reset."""
        extra, rd.buf = rd.buf, b""
        deadline = time.monotonic() + wait
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False, extra
            rd.sock.settimeout(left)
            try:
                chunk = rd.sock.recv(65536)
            except socket.timeout:
                return False, extra
            except (ConnectionResetError, BrokenPipeError):
                return True, extra
            if not chunk:
                return True, extra
            extra += chunk

    @staticmethod
    def _sentinel(rd):
        """(closed, extra) for a connection left open after its answers: a sentinel request is sent, and
        whatever comes back before its own answer is extra (a smuggled request's answer)."""
        try:
            rd.sock.sendall(SENTINEL)
        except (BrokenPipeError, ConnectionResetError):
            return True, rd.buf
        extra = b""
        rd.sock.settimeout(SENTINEL_WAIT)
        for _ in range(4):
            try:
                r = rd.read_response()
            except socket.timeout:
                return False, extra + rd.buf  # its parser waits for more bytes: nothing was answered
            except EOFError:
                return True, extra + rd.buf
            except (ConnectionResetError, BrokenPipeError):
                return True, extra
            except (ValueError, IndexError):
                return False, extra + rd.buf
            try:
                if r.status == 200 and json.loads(r.body).get("uri", "").endswith("/sentinel"):
                    return False, extra + rd.buf
            except ValueError:
                pass
            extra += b"HTTP %d %s: %s\n" % (r.status, r.reason.encode(), r.body[:80])
        return False, extra

    def run_exchange(self, data, count, expect_error):
        """Sends `data` on a fresh connection, reads `count` responses, then looks for more bytes and for
        the connection's close (up to CLOSE_WAIT after an expected error; a sentinel request otherwise)."""
        before = len(self.log_lines())
        out = Outcome()
        s = self.sock(timeout=READ_TIMEOUT)
        t0 = time.monotonic()
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer and close before everything is sent: read what it said
        rd = Reader(s)
        for i in range(count):
            try:
                r = rd.read_response()
            except socket.timeout:
                out.error = f"no response {i + 1} within {READ_TIMEOUT:g}s"
                break
            except EOFError:
                out.error = f"connection closed before response {i + 1} (partial: {rd.buf[:80]!r})"
                break
            except (ConnectionResetError, BrokenPipeError):
                out.error = f"connection reset before response {i + 1}"
                break
            except (ValueError, IndexError) as e:
                out.error = f"unparsable response {i + 1}: {e} ({rd.buf[:80]!r})"
                break
            if i == 0:
                out.elapsed = time.monotonic() - t0
            out.responses.append(r)
        if out.error is None:
            if expect_error:
                out.closed, out.extra = self._drain(rd, CLOSE_WAIT)
            else:
                out.closed, out.extra = self._sentinel(rd)
        out.log = [line for line in self.log_lines()[before:] if line != "GET /sentinel"]
        return out

    def expect(self, data, status, reached=(), at_once=False, check=None):
        """One case: `status` is the status, or the list of statuses of a pipeline; `reached` the exact
        lines PHP must log (str, or re.Pattern for a full match)."""
        statuses = [status] if isinstance(status, int) else list(status)
        expect_error = statuses[-1] >= 400
        out = self.run_exchange(data, len(statuses), expect_error)
        problems = []
        if out.statuses() != statuses:
            problems.append(f"answered {out.statuses() or 'nothing'}, expected {statuses}")
        if out.error:
            problems.append(out.error)
        if expect_error and out.error is None and not out.closed:
            problems.append("the connection was left open after the error")
        if out.extra:
            problems.append(f"{len(out.extra)} more bytes after the expected response(s): {out.extra[:160]!r}")
        smuggled = [line for line in out.log if "smuggled" in line]
        if smuggled:
            problems.append(f"SMUGGLED request reached PHP: {smuggled}")
        if not log_matches(out.log, list(reached)):
            saw = [line if len(line) <= 60 else line[:57] + "..." for line in out.log]
            want = [getattr(r, "pattern", r) for r in reached]
            want = [w if len(w) <= 60 else w[:57] + "..." for w in want]
            problems.append(f"PHP saw {saw}, expected {want}")
        if at_once and out.elapsed is not None and out.elapsed > AT_ONCE:
            problems.append(f"first answer after {out.elapsed:.2f}s, expected at once (< {AT_ONCE:g}s)")
        if problems:
            self.fail("; ".join(problems) + f"  [responses: {out.brief()}]")
        if check is not None:
            check(self, out)
        return out

    def test_server_still_serves(self):
        # A plain request after whatever ran before: the suite's own sanity check.
        self.expect(b"GET /sane?x=1 HTTP/1.1\r\nHost: a\r\n\r\n", 200, ["GET /sane"],
                    check=uri_is("http://a/sane?x=1"))


# ---------------------------------------------------------------------------------------------
# Checks on what PHP saw (for accepted requests)

def _make_test(data, status, reached=(), options=None):
    options = options or {}

    def test(self):
        self.expect(data, status, reached, **options)
    shown = repr(data)
    test.__doc__ = shown if len(shown) <= 100 else shown[:97] + "..."
    return test


for _name, _args in CASES.items():
    setattr(MalformedTest, "test_" + _name, _make_test(*_args))
del _name, _args


if __name__ == "__main__":
    unittest.main()
