"""logs (RoadRunner's logger plugin) and http.access_logs: JSON lines that always parse (a worker's stderr
garbage included) and carry zap's keys, the level filter, output to a file and to stdout, the modes
(production, raw, off), a bad value or an unopenable output failing the start, and access lines (console and
JSON) whose fields match the request, a static file's pid 0."""

import json
import os
import re
import socket
import unittest

from harness import HOST, Reader, Server, wait_until

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
CONSOLE_LINE = re.compile(rf"^{STAMP} (DEBUG|INFO |WARN |ERROR) [\w.]+: ")


def json_lines(text):
    """Every line as a dict; fails on a line that is not a JSON object with zap's four keys."""
    out = []
    for line in text.splitlines():
        obj = json.loads(line)  # raises on anything but one valid JSON value per line
        assert isinstance(obj, dict), line
        for key in ("level", "ts", "logger", "msg"):
            assert key in obj, f"{key} missing in {line}"
        assert re.fullmatch(STAMP, obj["ts"]), line
        assert obj["level"] in ("debug", "info", "warn", "error"), line
        out.append(obj)
    return out


def raw_stderr(srv):
    with open(srv.stderr_path, "rb") as f:
        return f.read()


def strict_text(data):
    """Bytes a JSON log wrote: UTF-8 or the test fails (no byte may escape the encoder)."""
    return data.decode("utf-8", "strict")


class LogsCase(unittest.TestCase):
    def server(self, config=None, script="echo.php", start=True):
        srv = Server(config, script=script)
        self.addCleanup(srv.close)
        if start:
            srv.start()
            self.addCleanup(lambda: srv.proc.poll() is None and srv.stop())  # first: a clean stop, checked
        return srv

    def stopped_json(self, srv):
        """Stops srv and returns its stderr as parsed JSON lines."""
        srv.stop()
        return json_lines(strict_text(raw_stderr(srv)))


class Encodings(LogsCase):
    def test_json_every_line_parses_and_carries_zaps_keys(self):
        srv = self.server({"logs": {"encoding": "json"}})
        self.assertEqual(srv.request("GET", "/x")[0], 200)
        srv.request("GET", "/error")  # a worker ERROR frame: a warn or error line
        lines = self.stopped_json(srv)
        self.assertTrue(any(l["logger"] == "http" and l["msg"].startswith("listening on http://") for l in lines),
                        lines)
        self.assertTrue(any(l["msg"] == "stopped" for l in lines), lines)
        # logs: present means RoadRunner's default mode, development: debug lines are in
        self.assertIn("debug", {l["level"] for l in lines})

    def test_mode_production_is_json_at_info(self):
        srv = self.server({"logs": {"mode": "production"}})
        srv.request("GET", "/x")
        lines = self.stopped_json(srv)
        self.assertTrue(lines)
        self.assertNotIn("debug", {l["level"] for l in lines})
        self.assertTrue(any(l["msg"].startswith("listening on http://") for l in lines))

    def test_console_by_default(self):
        srv = self.server()
        srv.stop()
        text = srv.stderr()
        self.assertTrue(text.splitlines())
        for line in text.splitlines():
            self.assertRegex(line, CONSOLE_LINE)
        self.assertNotIn(" DEBUG ", text, "Ferry's default without a logs section is info")

    def test_raw_gives_bare_messages(self):
        srv = self.server({"logs": {"mode": "raw"}})
        srv.stop()
        lines = srv.stderr().splitlines()
        self.assertTrue(any(l.startswith(f"listening on http://{srv.address} with 2 worker(s) and ") for l in lines),
                        lines)
        self.assertIn("stopped", lines)
        for line in lines:
            self.assertNotRegex(line, STAMP)
            self.assertFalse(line.startswith("{"), line)

    def test_mode_off_logs_nothing(self):
        srv = self.server({"logs": {"mode": "off"}, "http": {"access_logs": True}}, script="stderr_garbage.php")
        self.assertEqual(srv.request("GET", "/x")[2], b"ok")
        srv.request("GET", "/missing-route")
        srv.stop()
        self.assertEqual(raw_stderr(srv), b"")
        self.assertFalse([l for l in srv.stdout_lines if not l.startswith("listening on http://")])


class Levels(LogsCase):
    def test_warn_hides_info(self):
        # logs.bogus: an unknown key, warned about once the logger is configured
        srv = self.server({"logs": {"level": "warn", "bogus": 1}})
        srv.request("GET", "/x")
        srv.stop()
        text = srv.stderr()
        self.assertIn('WARN  config:', text)
        self.assertIn('unknown key "logs.bogus"', text)
        self.assertNotIn(" INFO ", text)
        self.assertNotIn(" DEBUG ", text)
        for line in text.splitlines():
            self.assertRegex(line, rf"^{STAMP} (WARN |ERROR) ")

    def test_error_hides_warn_in_json(self):
        srv = self.server({"logs": {"mode": "production", "level": "error", "bogus": 1}})
        srv.request("GET", "/x")
        srv.stop()
        self.assertEqual(raw_stderr(srv), b"", "the unknown key's warning is below error")

    def test_command_line_level_wins(self):
        srv = Server({"logs": {"mode": "production", "level": "error"}}, args=["--log-level", "info"])
        self.addCleanup(srv.close)
        srv.start()
        srv.stop()
        self.assertTrue(any(l["msg"] == "stopped" for l in json_lines(srv.stderr())))


class Outputs(LogsCase):
    def test_output_to_a_file(self):
        srv = self.server({"logs": {"mode": "production", "output": "ferry.log"}}, start=False)
        log_path = srv.path("ferry.log")  # relative to the server's working directory
        with open(log_path, "w") as f:
            f.write('{"level":"info","ts":"2000-01-01T00:00:00.000Z","logger":"old","msg":"kept"}\n')
        srv.start()
        srv.request("GET", "/x")
        srv.stop()
        self.assertEqual(raw_stderr(srv), b"")
        with open(log_path, "rb") as f:
            lines = json_lines(strict_text(f.read()))
        self.assertEqual(lines[0]["msg"], "kept", "appended to, not truncated")
        self.assertTrue(any(l["msg"].startswith("listening on http://") for l in lines))
        self.assertEqual(lines[-1]["msg"], "stopped")

    def test_output_stdout(self):
        srv = self.server({"logs": {"output": "stdout", "level": "info"}})
        srv.stop()
        self.assertEqual(raw_stderr(srv), b"")
        logged = [l for l in srv.stdout_lines if CONSOLE_LINE.match(l)]
        # (what came in the same read as the harness's "listening on" line is not kept: look at the others)
        self.assertTrue(any(" INFO  pool: worker " in l and " ready" in l for l in logged),
                        srv.stdout_lines)
        self.assertTrue(any(l.endswith(" INFO  core: stopped") for l in logged), srv.stdout_lines)

    def test_an_unopenable_output_fails_the_start(self):
        srv = self.server({"logs": {"output": "/nonexistent-ferry-dir/ferry.log"}}, start=False)
        with self.assertRaises(AssertionError):
            srv.start(timeout=10)
        self.assertEqual(srv.proc.returncode, 1)
        self.assertIn('ferry: logs.output: cannot open "/nonexistent-ferry-dir/ferry.log": No such file or directory',
                      srv.stderr())
        self.assertEqual(srv.workers(), [], "no worker was started")


class BadValues(LogsCase):
    def test_a_bad_level_fails_the_start_naming_key_and_line(self):
        srv = self.server({"logs": {"mode": "production", "level": "loud"}}, start=False)
        with open(srv.config_path) as f:
            line = next(i for i, text in enumerate(f.read().splitlines(), 1) if text.strip() == 'level: "loud"')
        with self.assertRaises(AssertionError):
            srv.start(timeout=10)
        self.assertEqual(srv.proc.returncode, 1)
        err = srv.stderr()
        self.assertRegex(err, rf'ferry\.yaml:{line}:\d+: logs\.level: "loud" is not a valid value \(expected '
                              r'"debug", "info", "warn" or "error"\)')

    def test_a_bad_mode_and_a_bad_access_logs(self):
        for cfg, key in (({"logs": {"mode": "verbose"}}, "logs.mode"),
                         ({"http": {"access_logs": "sometimes"}}, "http.access_logs")):
            srv = self.server(cfg, start=False)
            with self.assertRaises(AssertionError):
                srv.start(timeout=10)
            self.assertRegex(srv.stderr(), rf"ferry\.yaml:\d+:\d+: {re.escape(key)}: .* is not a valid value")


class WorkerGarbage(LogsCase):
    def test_a_workers_stderr_stays_valid_json(self):
        srv = self.server({"logs": {"mode": "production"}, "http": {"pool": {"num_workers": 1}}},
                          script="stderr_garbage.php")
        for _ in range(3):
            self.assertEqual(srv.request("GET", "/")[2], b"ok")
        self.assertTrue(srv.wait_for_log("request no newline"), srv.stderr())
        lines = self.stopped_json(srv)
        workers = [l for l in lines if l["logger"] == "worker"]
        (pid,) = {int(re.match(r"pid (\d+): ", l["msg"]).group(1)) for l in workers}
        msgs = [l["msg"] for l in workers]
        fffd = "\ufffd"
        p = f"pid {pid}: "
        self.assertIn(p + f"boot invalid {fffd}{fffd} {fffd}( {fffd * 3} {fffd * 3} end", msgs)
        self.assertIn(p + 'boot quote " backslash \\ tab \t cr \r bell \x07 nul \x00 esc \x1b[31mred\x1b[0m del \x7f',
                      msgs)
        fake = [l for l in workers if l["msg"] == p + 'boot {"msg":"fake","level":"error"}']
        self.assertEqual(len(fake), 1)
        # a worker cannot forge a line; what PHP prints while it boots is a warning, later the app's own info
        self.assertEqual(fake[0]["level"], "warn")
        self.assertEqual({l["level"] for l in workers if l["msg"].startswith(p + "request quote ")}, {"info"})
        self.assertIn(p + "boot valid caf\u00e9 \U0001f600", msgs)
        self.assertEqual(sum(m.startswith(p + "request quote ") for m in msgs), 3)
        # the line longer than 16 KiB came in pieces (its é, if cut between two, is replacement characters)
        self.assertTrue(any(m.startswith(p + "boot long " + "a" * 1000) for m in msgs))
        self.assertTrue(any(m.endswith("a" + "b" * 100) or m.endswith("\u00e9" + "b" * 100) or
                            m.endswith(fffd + "b" * 100) for m in msgs))


class AccessLogs(LogsCase):
    def public(self, srv):
        pub = srv.path("public")
        os.makedirs(pub, exist_ok=True)
        with open(os.path.join(pub, "style.css"), "wb") as f:
            f.write(b"body{}\n" * 10)
        return pub

    def exchange(self, srv, target):
        """One request with Connection: close; (the client's address, the response bytes, the parsed body)."""
        s = socket.create_connection((HOST, srv.port), timeout=10)
        try:
            local = s.getsockname()[0]  # the server logs the peer address as it logs it everywhere: no port
            s.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            data = Reader(s).read_to_eof()
        finally:
            s.close()
        return local, data

    def access_server(self, logs):
        srv = self.server({"logs": logs, "http": {"access_logs": True, "middleware": ["static"],
                                                  "static": {"dir": "public"}}}, start=False)
        self.public(srv)
        srv.start()
        self.addCleanup(lambda: srv.proc.poll() is None and srv.stop())
        return srv

    def test_console(self):
        srv = self.access_server({"level": "info"})
        remote, data = self.exchange(srv, "/x?y=1")
        body = json.loads(data.split(b"\r\n\r\n", 1)[1])
        _, static = self.exchange(srv, "/style.css")
        self.assertTrue(srv.wait_for_log("/style.css"), srv.stderr())
        srv.stop()
        text = srv.stderr()
        m = re.search(rf'^{STAMP} INFO  http\.access: (\S+) "GET /x\?y=1" (\d+) (\d+) B (\d+\.\d{{3}}) ms '
                      r'worker (\d+)$', text, re.M)
        self.assertIsNotNone(m, text)
        self.assertEqual(m.group(1), remote)
        self.assertEqual(int(m.group(2)), 200)
        self.assertEqual(int(m.group(3)), len(data))
        self.assertGreater(float(m.group(4)), 0)
        self.assertEqual(int(m.group(5)), body["pid"])
        m = re.search(rf'http\.access: \S+ "GET /style\.css" 200 (\d+) B [\d.]+ ms worker 0$', text, re.M)
        self.assertIsNotNone(m, text)
        self.assertEqual(int(m.group(1)), len(static))

    def test_json(self):
        srv = self.access_server({"mode": "production"})
        remote, data = self.exchange(srv, "/x?y=1")
        body = json.loads(data.split(b"\r\n\r\n", 1)[1])
        _, static = self.exchange(srv, "/style.css")
        _, missing = self.exchange(srv, "/status/404")
        self.assertTrue(srv.wait_for_log("/status/404"), srv.stderr())
        lines = self.stopped_json(srv)
        access = {l["path"]: l for l in lines if l["logger"] == "http.access"}
        a = access["/x?y=1"]
        self.assertEqual((a["level"], a["msg"], a["remote"], a["method"], a["status"], a["bytes"], a["pid"]),
                         ("info", "request", remote, "GET", 200, len(data), body["pid"]))
        self.assertIsInstance(a["duration_ms"], float)
        self.assertGreater(a["duration_ms"], 0)
        s = access["/style.css"]
        self.assertEqual((s["status"], s["bytes"], s["pid"]), (200, len(static), 0))
        self.assertEqual((access["/status/404"]["status"], access["/status/404"]["bytes"]), (404, len(missing)))

    def test_off_by_default(self):
        srv = self.server({"logs": {"mode": "production"}})
        srv.request("GET", "/x")
        lines = self.stopped_json(srv)
        self.assertFalse([l for l in lines if l["logger"] == "http.access"])


if __name__ == "__main__":
    unittest.main()
