"""X-Sendfile (http.middleware: "sendfile", RoadRunner's middleware): a PHP response naming a file with
X-Sendfile is answered with that file by the server, with Range and conditional requests as static files
get them; bad paths are answered 404/403/500 with a log line; PHP sees X-Sendfile-Type only from the server."""

import os
import tempfile
import unittest
import urllib.parse

from harness import ServerTestCase


class SendfileTest(ServerTestCase):
    CONFIG = {"http": {"middleware": ["sendfile"]}}
    SCRIPT = "sendfile.php"

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory(prefix="ferry-sendfile-")
        cls.file = os.path.join(cls.dir.name, "data.bin")
        cls.data = os.urandom(200_000)
        with open(cls.file, "wb") as f:
            f.write(cls.data)
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.dir.cleanup()

    def get(self, path, headers=None, method="GET", **query):
        q = urllib.parse.urlencode(dict({"path": path}, **query))
        status, hdrs, body = self.server.request(method, "/?" + q, headers=headers)
        return status, {k.lower(): v for k, v in hdrs}, body

    def test_the_file_is_sent_by_the_server(self):
        status, h, body = self.get(self.file)
        self.assertEqual(status, 200)
        self.assertEqual(body, self.data)
        self.assertEqual(h["content-length"], str(len(self.data)))
        self.assertNotIn("x-sendfile", h)
        self.assertEqual(h["x-app"], "yes")  # the worker's other headers go with it
        self.assertEqual(h["content-type"], "application/octet-stream")
        self.assertEqual(h["accept-ranges"], "bytes")
        self.assertTrue(h["etag"].startswith('W/"'))
        self.assertIn("GMT", h["last-modified"])
        status, h2, body = self.get(self.file, method="HEAD")
        self.assertEqual((status, body, h2["content-length"]), (200, b"", str(len(self.data))))

    def test_range_and_conditional_requests(self):
        status, h, body = self.get(self.file, headers={"Range": "bytes=100-199"})
        self.assertEqual(status, 206)
        self.assertEqual(body, self.data[100:200])
        self.assertEqual(h["content-range"], f"bytes 100-199/{len(self.data)}")
        status, h, body = self.get(self.file, headers={"Range": "bytes=999999-"})
        self.assertEqual(status, 416)
        etag = self.get(self.file)[1]["etag"]
        status, h, body = self.get(self.file, headers={"If-None-Match": etag})
        self.assertEqual((status, body), (304, b""))
        # the worker's own ETag is the one compared
        status, h, body = self.get(self.file, headers={"If-None-Match": '"v7"'}, etag='"v7"', ctype="text/x-test")
        self.assertEqual(status, 304)
        status, h, body = self.get(self.file, etag='"v7"', ctype="text/x-test")
        self.assertEqual((status, h["etag"], h["content-type"]), (200, '"v7"', "text/x-test"))
        # another status than 200: the whole file, no range
        status, h, body = self.get(self.file, headers={"Range": "bytes=0-0"}, status="404")
        self.assertEqual((status, body), (404, self.data))

    def test_bad_paths(self):
        cases = [(os.path.join(self.dir.name, "missing"), 404, "does not exist"),
                 (self.dir.name, 403, "is not a regular file"),
                 ("relative/path", 500, "is not an absolute path")]
        for path, code, why in cases:
            status, h, body = self.get(path)
            self.assertEqual(status, code, path)
            self.assertNotIn(b"this body is not sent", body)
            self.assertTrue(self.server.wait_for_log(f'X-Sendfile "{path}" {why}'), self.server.stderr())
        self.assertEqual(self.get(self.file)[0], 200)  # the connection and the worker are fine

    def test_php_sees_the_servers_x_sendfile_type_only(self):
        status, _, body = self.server.request("GET", "/type", headers={"X-Sendfile-Type": "X-Accel-Redirect"})
        self.assertEqual((status, body), (200, b"X-Sendfile"))


class WithoutSendfile(ServerTestCase):
    SCRIPT = "sendfile.php"

    def test_a_clients_x_sendfile_type_never_reaches_php(self):
        status, _, body = self.server.request("GET", "/type", headers={"X-Sendfile-Type": "X-Sendfile"})
        self.assertEqual((status, body), (200, b"-"))


if __name__ == "__main__":
    unittest.main()
