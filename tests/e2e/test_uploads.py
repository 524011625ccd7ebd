"""Multipart forms and uploads (docs/protocol.md §3): fields into the parsed body, files streamed to temp
files in http.uploads.dir and described in `uploads` with PHP's error codes; the temp files are deleted
after the response whatever happened."""
import hashlib
import json
import os
import shutil
import socket
import tempfile
import time
import unittest

from harness import HOST, Server, metric, wait_until, rss_kib


SANITIZED = os.environ.get("FERRY_SANITIZED") == "1"


class UploadsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ferry-e2e-uploads-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.files = tempfile.mkdtemp(prefix="ferry-e2e-files-")
        self.addCleanup(shutil.rmtree, self.files, True)

    def server(self, uploads=None, http_extra=None, **kw):
        cfg = {"http": dict({"uploads": dict({"dir": self.dir}, **(uploads or {}))}, **(http_extra or {}))}
        for k, v in kw.items():
            cfg[k] = v
        srv = Server(cfg, **({"script": kw.pop("script")} if "script" in kw else {}))
        srv.start()
        self.addCleanup(srv.close)
        self.addCleanup(lambda: srv.proc.poll() is None and srv.stop())
        return srv

    def file(self, name, data):
        path = os.path.join(self.files, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def leftovers(self):
        """Upload files in the directory (not the lock file each running server keeps there)."""
        return [n for n in os.listdir(self.dir) if not n.endswith(".lock")]

    def assert_no_leftovers(self, msg=None):
        """The server removes a request's upload files right after writing its answer: a client that has read
        the answer may look before the server's next step (seen under load), so this waits for it, 5 s at
        most."""
        self.assertTrue(wait_until(lambda: self.leftovers() == [], 5), msg or self.leftovers())

    def start_unfinished_upload(self, srv):
        s = socket.create_connection((HOST, srv.port), timeout=10)
        self.addCleanup(s.close)
        s.sendall(b"POST /ctx HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=B\r\n"
                  b"Content-Length: 10000000\r\n\r\n"
                  b"--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.bin\"\r\n\r\n" + b"z" * 300000)
        return s

    def test_fields_and_files_reach_php_and_the_temp_files_go(self):
        srv = self.server()
        a = self.file("a.txt", b"hello upload\n")
        b = self.file("b.bin", os.urandom(300000))
        out = srv.curl("-F", "x=1", "-F", "n[k]=v", "-F", f"f=@{a};type=text/plain", "-F", f"g[]=@{b}",
                       "-F", f"g[]=@{a}", srv.url("/ctx"))
        self.assertEqual(out.returncode, 0, out.stderr)
        d = json.loads(out.stdout)
        self.assertTrue(d["parsed"])
        self.assertEqual(d["form"], {"x": "1", "n": {"k": "v"}})
        f = d["uploads"]["f"]
        self.assertEqual((f["name"], f["mime"], f["size"], f["error"]), ("a.txt", "text/plain", 13, 0))
        self.assertEqual(f["contentMd5"], hashlib.md5(b"hello upload\n").hexdigest())
        self.assertTrue(f["tmpName"].startswith(self.dir + "/"), f["tmpName"])
        g = d["uploads"]["g"]
        self.assertEqual([x["name"] for x in g], ["b.bin", "a.txt"])
        with open(b, "rb") as fh:
            self.assertEqual(g[0]["contentMd5"], hashlib.md5(fh.read()).hexdigest())
        self.assertEqual(g[0]["size"], 300000)
        self.assert_no_leftovers("temp files deleted after the response")

    def test_error_codes_forbidden_too_large_and_empty(self):
        srv = self.server({"max_file_size": "1KB", "forbid": [".php", ".EXE"]})
        small = self.file("ok.txt", b"x" * 100)
        big = self.file("big.txt", b"y" * 5000)
        php = self.file("evil.php", b"<?php echo 1;")
        exe = self.file("run.exe", b"MZ")
        out = srv.curl("-F", f"ok=@{small}", "-F", f"big=@{big}", "-F", f"php=@{php}", "-F", f"exe=@{exe}",
                       "-F", "empty=@/dev/null;filename=", srv.url("/ctx"))
        d = json.loads(out.stdout)["uploads"]
        self.assertEqual(d["ok"]["error"], 0)
        self.assertEqual(d["big"]["error"], 1)   # UPLOAD_ERR_INI_SIZE
        self.assertEqual(d["php"]["error"], 8)   # UPLOAD_ERR_EXTENSION
        self.assertEqual(d["exe"]["error"], 8)
        self.assertEqual(d["empty"]["error"], 4) # UPLOAD_ERR_NO_FILE
        for k in ("big", "php", "exe", "empty"):
            self.assertEqual(d[k]["tmpName"], "", k)
        self.assert_no_leftovers()

    def test_allow_list(self):
        srv = self.server({"allow": [".jpg"], "forbid": [".exe"]})
        jpg = self.file("p.JPG", b"\xff\xd8")
        txt = self.file("t.txt", b"t")
        d = json.loads(srv.curl("-F", f"a=@{jpg}", "-F", f"b=@{txt}", srv.url("/ctx")).stdout)["uploads"]
        self.assertEqual((d["a"]["error"], d["b"]["error"]), (0, 8))

    def test_hostile_file_names_are_never_paths(self):
        srv = self.server()
        body = (b"--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"../../etc/passwd\x01\"\r\n\r\n"
                b"data\r\n--B\r\nContent-Disposition: form-data; name=\"g\"; filename=\"C:\\\\x\\\\evil.txt\"\r\n\r\n"
                b"data2\r\n--B--\r\n")
        status, _, raw = srv.request("POST", "/ctx", body=body,
                                     headers={"Content-Type": "multipart/form-data; boundary=B"})
        self.assertEqual(status, 200, raw)
        d = json.loads(raw)["uploads"]
        self.assertEqual(d["f"]["name"], "passwd")
        self.assertEqual(d["g"]["name"], "evil.txt")
        self.assertTrue(d["f"]["tmpName"].startswith(self.dir + "/ferry-upload-"))
        self.assert_no_leftovers()

    def test_malformed_multipart_is_400_and_leaves_nothing(self):
        srv = self.server()
        for body, ctype in ((b"--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a\"\r\n\r\nabc",
                             "multipart/form-data; boundary=B"),
                            (b"anything", "multipart/form-data"),
                            (b"--B\r\nno colon\r\n\r\nx\r\n--B--", "multipart/form-data; boundary=B")):
            status, _, raw = srv.request("POST", "/ctx", body=body, headers={"Content-Type": ctype})
            self.assertEqual(status, 400, raw)
        self.assert_no_leftovers()

    def test_multipart_limits_name_their_keys(self):
        srv = self.server(http_extra={"limits": {"max_form_size": "1KB", "max_form_fields": 3}})
        big = (b"--B\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\n" + b"v" * 2000 + b"\r\n--B--\r\n")
        status, _, raw = srv.request("POST", "/ctx", body=big,
                                     headers={"Content-Type": "multipart/form-data; boundary=B"})
        self.assertEqual(status, 413, raw)
        self.assertIn(b"http.limits.max_form_size", raw)
        many = b"".join(b"--B\r\nContent-Disposition: form-data; name=\"f%d\"; filename=\"a\"\r\n\r\nx\r\n" % i
                        for i in range(5)) + b"--B--\r\n"
        status, _, raw = srv.request("POST", "/ctx", body=many,
                                     headers={"Content-Type": "multipart/form-data; boundary=B"})
        self.assertEqual(status, 400, raw)
        self.assertIn(b"http.limits.max_form_fields", raw)
        self.assertTrue(wait_until(lambda: self.leftovers() == [], 5), self.leftovers())

    def test_client_gone_mid_upload_leaves_no_temp_file(self):
        srv = self.server(metrics={"address": f"{HOST}:0"})
        s = socket.create_connection((HOST, srv.port), timeout=10)
        head = (b"POST /ctx HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=B\r\n"
                b"Content-Length: 10000000\r\n\r\n"
                b"--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.bin\"\r\n\r\n")
        s.sendall(head + b"z" * 200000)
        self.assertTrue(wait_until(lambda: len(self.leftovers()) == 1, 5), "the upload is spooled to a temp file")
        self.assertEqual(metric(srv, "ferry_upload_files"), 1)
        s.close()
        self.assertTrue(wait_until(lambda: self.leftovers() == [], 5), self.leftovers())
        self.assertEqual(metric(srv, "ferry_upload_files"), 0)

    def test_worker_crash_after_upload_leaves_no_temp_file(self):
        srv = self.server()
        a = self.file("a.txt", b"a" * 1000)
        out = srv.curl("-s", "-o", "/dev/null", "-w", "%{http_code}", "-F", f"f=@{a}", srv.url("/exit"))
        self.assertEqual(out.stdout, b"502")
        self.assert_no_leftovers()

    def test_stop_during_an_upload_leaves_no_temp_file(self):
        srv = self.server()
        s = socket.create_connection((HOST, srv.port), timeout=10)
        s.sendall(b"POST /ctx HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=B\r\n"
                  b"Content-Length: 10000000\r\n\r\n"
                  b"--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.bin\"\r\n\r\n" + b"z" * 100000)
        self.assertTrue(wait_until(lambda: len(self.leftovers()) == 1, 5))
        srv.stop()
        s.close()
        self.assert_no_leftovers()

    def test_upload_files_of_a_killed_server_are_removed_at_the_next_start(self):
        # Issue 41 item 7: a server killed with -9 cannot delete its upload files; the next one does.
        first = self.server()
        self.start_unfinished_upload(first)
        self.assertTrue(wait_until(lambda: len(self.leftovers()) == 1, 5), self.leftovers())
        left = self.leftovers()[0]
        self.assertTrue(left.startswith(f"ferry-upload-{first.proc.pid}-"), left)
        self.assertTrue(wait_until(lambda: os.path.getsize(os.path.join(self.dir, left)) >= 290000, 5))
        dead_pid = first.proc.pid
        first.kill()  # SIGKILL
        self.assertEqual(self.leftovers(), [left], "a killed server cannot remove its files")
        second = self.server()
        self.assertEqual(self.leftovers(), [], "the next start removes them")
        self.assertTrue(second.wait_for_log(f"uploads: removed 1 stale upload file(s), 0.3 MB, left by pid "
                                            f"{dead_pid}"), second.stderr())
        # The lock file of the killed server went too: only the running server's is left.
        locks = [n for n in os.listdir(self.dir) if n.endswith(".lock")]
        self.assertEqual(len(locks), 1, locks)
        self.assertTrue(locks[0].startswith(f"ferry-upload-{second.proc.pid}-"), locks)

    def test_servers_sharing_the_directory_keep_each_others_live_files(self):
        first = self.server()
        self.start_unfinished_upload(first)
        self.assertTrue(wait_until(lambda: len(self.leftovers()) == 1, 5), self.leftovers())
        second = self.server()  # starts while the first one's upload is in flight
        self.assertEqual(len(self.leftovers()), 1, "the live upload of another server stays")
        self.assertNotIn("stale upload", second.stderr())
        self.assertEqual(len([n for n in os.listdir(self.dir) if n.endswith(".lock")]), 2)
        second.stop()
        first.stop()
        self.assertEqual(os.listdir(self.dir), [], "a stopped server removes its lock file")

    def test_psr7_bridge_gets_uploaded_files(self):
        srv = self.server(script="psr7_echo.php")
        a = self.file("a.txt", b"psr7 upload")
        d = json.loads(srv.curl("-F", "x=1", "-F", f"f=@{a};type=text/plain", srv.url("/")).stdout)
        self.assertEqual(d["parsedBody"], {"x": "1"})
        self.assertEqual(d["files"]["f"], {"name": "a.txt", "type": "text/plain", "size": 11, "error": 0,
                                           "md5": hashlib.md5(b"psr7 upload").hexdigest()})

    def test_a_200_mib_upload_keeps_the_server_rss_flat(self):
        srv = self.server()
        big = os.path.join(self.files, "big.bin")
        with open(big, "wb") as f:
            chunk = os.urandom(1 << 20)
            for _ in range(200):
                f.write(chunk)
        before = rss_kib(srv.proc.pid, "VmHWM")
        # /status/200 does not read the file in PHP (a 200 MiB file_get_contents would pass PHP's memory_limit).
        out = srv.curl("-s", "--max-time", "150", "-o", "/dev/null", "-w", "%{http_code}", "-F", f"f=@{big}",
                       srv.url("/status/200"), timeout=160)
        self.assertEqual(out.stdout, b"200", out.stderr)
        grown = rss_kib(srv.proc.pid, "VmHWM") - before
        if not SANITIZED:  # AddressSanitizer's quarantine keeps freed memory: RSS says nothing there
            self.assertLess(grown, 32 * 1024, f"peak RSS grew by {grown} KiB during a 200 MiB upload")
        self.assert_no_leftovers()


if __name__ == "__main__":
    unittest.main()
