"""A worker that behaves as RoadRunner's PHP packages do on the pipes (tests/php/rr_worker.php: one 12-byte
header read, JSON contexts, parsed forms, uploads from tmpName, flags 0 or 0x08, 103 before 200, PING every
5th stream frame) runs unmodified; a config with RoadRunner's sections loads with one warning per section
Ferry does not have."""
import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import unittest

from harness import BIN, HOST, Reader, Server


class RoadRunnerWorkerTest(unittest.TestCase):
    def server(self, env=None):
        srv = Server(script="rr_worker.php", env=env)
        srv.start()
        self.addCleanup(srv.close)
        self.addCleanup(lambda: srv.proc.poll() is None and srv.stop())
        return srv

    def test_requests_forms_and_uploads_with_both_response_flags(self):
        files = tempfile.mkdtemp(prefix="ferry-e2e-rr-")
        self.addCleanup(shutil.rmtree, files, True)
        up = os.path.join(files, "u.txt")
        with open(up, "wb") as f:
            f.write(b"uploaded by curl")
        for flags in ("", "json"):  # roadrunner-http 3.4 answers with flags 0, 3.5+ with JSON
            srv = self.server({"RR_FIXTURE_FLAGS": flags})
            d = json.loads(srv.curl(srv.url("/plain?x=1")).stdout)
            self.assertEqual((d["method"], d["parsed"], d["parsedBody"]), ("GET", False, None))
            d = json.loads(srv.curl("-d", "a=1&b[]=2&b[]=3", srv.url("/form")).stdout)
            self.assertEqual(d["parsedBody"], {"a": "1", "b": ["2", "3"]})
            d = json.loads(srv.curl("-F", "x=1", "-F", f"f=@{up};type=text/plain", srv.url("/up")).stdout)
            self.assertEqual(d["parsedBody"], {"x": "1"})
            self.assertEqual(d["files"]["f"], {"name": "u.txt", "mime": "text/plain", "size": 16, "error": 0,
                                               "md5": hashlib.md5(b"uploaded by curl").hexdigest()})
            self.assertNotIn("short frame header read", srv.stderr())
            srv.stop()

    def test_early_hints_come_before_the_response(self):
        srv = self.server()
        s = socket.create_connection((HOST, srv.port), timeout=10)
        self.addCleanup(s.close)
        s.sendall(b"GET /early-hints HTTP/1.1\r\nHost: x\r\n\r\n")
        rd = Reader(s)
        first = rd.read_response()
        self.assertEqual(first.status, 103)
        self.assertIn("rel=preload", first.header("Link"))
        final = rd.read_response()
        self.assertEqual((final.status, final.body), (200, b"after hints\n"))

    def test_a_streamed_generator_with_pings_completes(self):
        srv = self.server()
        out = srv.curl("-s", "--raw", "-i", srv.url("/stream?n=12"))
        self.assertIn(b"Transfer-Encoding: chunked", out.stdout)
        body = srv.curl("-s", srv.url("/stream?n=12")).stdout
        self.assertEqual(body, b"".join(b"chunk %d\n" % i for i in range(1, 13)))
        # Twice more on the same workers: every PING was answered, nothing is left in the pipes.
        self.assertEqual(srv.curl("-s", srv.url("/stream?n=7")).stdout.count(b"chunk"), 7)
        self.assertEqual(json.loads(srv.curl(srv.url("/after")).stdout)["method"], "GET")


class RoadRunnerConfigTest(unittest.TestCase):
    def test_every_roadrunner_section_loads_and_is_in_effect(self):
        cfg = """version: "3"
rpc:
  listen: tcp://127.0.0.1:6001
server:
  command: "php worker.php"
  relay: pipes
http:
  address: 127.0.0.1:8080
  max_request_size: 256
  raw_body: false
  internal_error_code: 500
  access_logs: false
  middleware: ["static", "headers", "gzip", "proxy_ip_parser"]
  trusted_subnets: ["10.0.0.0/8", "127.0.0.0/8"]
  uploads:
    dir: /tmp
    forbid: [".php", ".exe"]
    allow: []
  static:
    dir: public
    forbid: [".php"]
    calculate_etag: true
  pool:
    num_workers: 4
    max_jobs: 64
    max_queue_size: 100
    allocate_timeout: 60s
    destroy_timeout: 60s
    reset_timeout: 60s
    supervisor:
      watch_tick: 1s
      ttl: 0s
      idle_ttl: 10s
      max_worker_memory: 128
      exec_ttl: 60s
status:
  address: 127.0.0.1:2114
metrics:
  address: 127.0.0.1:2112
logs:
  mode: production
  level: info
reload:
  interval: 1s
  patterns: [".php"]
"""
        d = tempfile.mkdtemp(prefix="ferry-e2e-rrcfg-")
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, ".rr.yaml")
        with open(path, "w") as f:
            f.write(cfg)
        r = subprocess.run([BIN, "config", "-c", path], capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)
        warnings = [line for line in r.stderr.splitlines() if "WARN" in line]
        # every section of this file is Ferry's too now; of its middleware, one is RoadRunner's only (gzip is
        # Ferry's since issue 45)
        self.assertEqual(len(warnings), 1, warnings)
        self.assertIn('.rr.yaml:13:15: http.middleware lists "headers", RoadRunner middleware that Ferry '
                      'does not have: ignored', warnings[0])
        self.assertIn("compression:", r.stdout)  # in effect: its section shows in the effective config
        warnings = []
        self.assertIn("trusted_subnets", r.stdout)  # supported keys are in the effective config
        self.assertNotIn("uploads.forbid", "\n".join(warnings))
        # Ferry's since issue 8 (middleware, static) and issue 10 (rpc, reload, reset_timeout)
        for supported in ('"http.middleware"', '"http.static"', 'key "rpc"', 'key "reload"', "reset_timeout",
                          'key "status"', 'key "logs"', "access_logs", "supervisor",
                          'key "metrics"'):
            self.assertNotIn(supported, "\n".join(warnings))
        self.assertIn("status:\n  address: \"127.0.0.1:2114\"", r.stdout)  # status (issue 12), in effect
        self.assertIn('logs:\n  mode: "production"\n  level: "info"\n  encoding: "json"', r.stdout)  # issue 12
        self.assertIn("access_logs: false", r.stdout)
        self.assertIn('metrics:\n  address: "127.0.0.1:2112"', r.stdout)
        self.assertIn("idle_ttl: 10s", r.stdout)  # the supervisor's limits (issue 12), in effect
        self.assertIn("max_worker_memory: 134217728B", r.stdout)
        self.assertIn("calculate_etag: true", r.stdout)
        self.assertIn('listen: "tcp://127.0.0.1:6001"', r.stdout)
        self.assertIn("interval: 1s", r.stdout)  # reload, in the effective config


if __name__ == "__main__":
    unittest.main()
