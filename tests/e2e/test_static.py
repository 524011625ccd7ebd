"""Static files (http.static, "static" in http.middleware): headers, conditional requests, ranges,
precompressed siblings, traversal attempts, hidden files, index and redirect, fall-through to PHP, files
changed or truncated on disk, large downloads beside other requests, and clients that stop reading."""

import email.utils
import json
import os
import time
import unittest
import zlib

from harness import Reader, Server
from statictree import CSS, SECRET, StaticCase, _read, raw


class StaticTest(StaticCase):
    # ---------------------------------------------------------------- responses

    def test_a_file_with_every_header(self):
        srv = self.server({"cache_control": "public, max-age=3600", "response": {"X-Served-By": "ferry-static"}})
        st = os.stat(os.path.join(self.pub, "css/site.css"))
        status, h, body = self.get(srv, "/css/site.css")
        self.assertEqual(status, 200)
        self.assertEqual(body, CSS)
        self.assertEqual(h["content-type"], "text/css; charset=utf-8")
        self.assertEqual(h["content-length"], str(len(CSS)))
        self.assertEqual(h["last-modified"], email.utils.formatdate(int(st.st_mtime), usegmt=True))
        self.assertRegex(h["etag"], r'^W/"[0-9a-f]+-[0-9a-f]+"$')
        self.assertEqual(h["accept-ranges"], "bytes")
        self.assertEqual(h["cache-control"], "public, max-age=3600")
        self.assertEqual(h["x-served-by"], "ferry-static")
        self.assertNotIn("vary", h)
        # The types come from /etc/mime.types.
        self.assertEqual(self.get(srv, "/img/logo.png")[1]["content-type"], "image/png")
        self.assertEqual(self.get(srv, "/data.unknownext")[1]["content-type"], "application/octet-stream")
        self.assertEqual(self.get(srv, "/")[1]["content-type"], "text/html; charset=utf-8")
        # HEAD: the same head, no body.
        s2, h2, b2 = self.get(srv, "/css/site.css", method="HEAD")
        self.assertEqual((s2, b2), (200, b""))
        self.assertEqual({k: h2[k] for k in ("content-length", "etag", "last-modified")},
                         {k: h[k] for k in ("content-length", "etag", "last-modified")})
        # An empty file.
        s3, h3, b3 = self.get(srv, "/empty.txt")
        self.assertEqual((s3, h3["content-length"], b3), (200, "0", b""))

    def test_pipelined_files_and_php_answers_come_in_order(self):
        srv = self.server()
        s = srv.socket()
        self.addCleanup(s.close)
        s.sendall(b"GET /css/site.css HTTP/1.1\r\nHost: x\r\n\r\n"
                  b"GET /no-such-file HTTP/1.1\r\nHost: x\r\n\r\n"
                  b"HEAD /notes.txt HTTP/1.1\r\nHost: x\r\n\r\n"
                  b"GET /notes.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        rd = Reader(s)
        r1 = rd.read_response()
        r2 = rd.read_response()
        r3 = rd.read_response(head_request=True)
        r4 = rd.read_response()
        self.assertEqual((r1.status, r1.body), (200, CSS))
        self.assertEqual(json.loads(r2.body)["path"], "/no-such-file")
        self.assertEqual((r3.status, r3.header("Content-Length")), (200, "12"))
        self.assertEqual(r4.body, b"plain notes\n")
        # HTTP/1.0 gets the file and a closed connection.
        r = raw(srv, b"GET /notes.txt HTTP/1.0\r\n\r\n")
        self.assertEqual((r.status, r.body), (200, b"plain notes\n"))

    def test_conditional_requests(self):
        srv = self.server({"cache_control": "no-cache"})
        _, h, _ = self.get(srv, "/css/site.css")
        etag, lm = h["etag"], h["last-modified"]
        for inm in (etag, f'"nope", {etag}', "*", etag[2:]):  # weak comparison: W/"x" matches "x"
            status, h2, body = self.get(srv, "/css/site.css", {"If-None-Match": inm})
            self.assertEqual((status, body), (304, b""), inm)
            self.assertEqual(h2["etag"], etag)
            self.assertEqual(h2["cache-control"], "no-cache")
            self.assertNotIn("content-length", h2)
        self.assertEqual(self.get(srv, "/css/site.css", {"If-None-Match": '"other"'})[0], 200)
        self.assertEqual(self.get(srv, "/css/site.css", {"If-Modified-Since": lm})[0], 304)
        later = email.utils.formatdate(time.time() + 3600, usegmt=True)
        earlier = email.utils.formatdate(time.time() - 86400 * 400, usegmt=True)
        self.assertEqual(self.get(srv, "/css/site.css", {"If-Modified-Since": later})[0], 304)
        self.assertEqual(self.get(srv, "/css/site.css", {"If-Modified-Since": earlier})[0], 200)
        self.assertEqual(self.get(srv, "/css/site.css", {"If-Modified-Since": "yesterday-ish"})[0], 200)
        # RFC 850 and asctime dates are HTTP-dates too.
        t = time.gmtime(time.time() + 3600)
        self.assertEqual(self.get(srv, "/css/site.css", {"If-Modified-Since": time.strftime("%A, %d-%b-%y %H:%M:%S GMT", t)})[0], 304)
        self.assertEqual(self.get(srv, "/css/site.css", {"If-Modified-Since": time.strftime("%a %b %e %H:%M:%S %Y", t)})[0], 304)
        # If-None-Match decides when both are present.
        self.assertEqual(self.get(srv, "/css/site.css", {"If-None-Match": '"other"', "If-Modified-Since": later})[0], 200)

    def test_ranges(self):
        srv = self.server({"calculate_etag": True})
        data = _read(os.path.join(self.pub, "img/logo.png"))
        size = len(data)
        _, h, _ = self.get(srv, "/img/logo.png")
        etag, lm = h["etag"], h["last-modified"]
        cases = {"bytes=0-9": (0, 9), "bytes=10-": (10, size - 1), "bytes=-5": (size - 5, size - 1),
                 "bytes=100-99999": (100, size - 1), "bytes=3-3": (3, 3)}
        for spec, (a, b) in cases.items():
            status, h2, body = self.get(srv, "/img/logo.png", {"Range": spec})
            self.assertEqual(status, 206, spec)
            self.assertEqual(h2["content-range"], f"bytes {a}-{b}/{size}", spec)
            self.assertEqual(body, data[a:b + 1], spec)
        for spec in ("bytes=5-3", "bytes=0-1,4-5", "items=0-1", "bytes=x-y", "bytes=-", "bytes = 3-3"):
            status, h2, body = self.get(srv, "/img/logo.png", {"Range": spec})
            self.assertEqual((status, body), (200, data), spec)  # ignored: the whole file
        for spec in (f"bytes={size}-", "bytes=-0", f"bytes={size + 10}-{size + 20}"):
            status, h2, body = self.get(srv, "/img/logo.png", {"Range": spec})
            self.assertEqual(status, 416, spec)
            self.assertEqual(h2["content-range"], f"bytes */{size}", spec)
        # If-Range: the range only while the file is the one the client has.
        self.assertEqual(self.get(srv, "/img/logo.png", {"Range": "bytes=0-0", "If-Range": etag})[0], 206)
        self.assertEqual(self.get(srv, "/img/logo.png", {"Range": "bytes=0-0", "If-Range": lm})[0], 206)
        self.assertEqual(self.get(srv, "/img/logo.png", {"Range": "bytes=0-0", "If-Range": '"old"'})[0], 200)
        self.assertEqual(self.get(srv, "/img/logo.png", {"Range": "bytes=0-0", "If-Range": "W/" + etag})[0], 200)
        old = email.utils.formatdate(time.time() - 86400 * 400, usegmt=True)
        self.assertEqual(self.get(srv, "/img/logo.png", {"Range": "bytes=0-0", "If-Range": old})[0], 200)

    def test_etags_strong_from_content_or_weak(self):
        srv = self.server({"calculate_etag": True})
        etag = self.get(srv, "/css/site.css")[1]["etag"]
        self.assertEqual(etag, '"%x-%x"' % (zlib.crc32(CSS), len(CSS)))
        srv.close()
        srv = self.server({"calculate_etag": True, "weak": True})
        self.assertTrue(self.get(srv, "/css/site.css")[1]["etag"].startswith('W/"'))

    # ---------------------------------------------------------------- what is never served

    def test_traversal_attempts_get_403_or_php_and_never_a_file_outside(self):
        srv = self.server({"on_missing": "404"})
        attempts = [
            b"/../secret.txt", b"/%2e%2e/secret.txt", b"/%2E%2E/secret.txt", b"/.%2e/secret.txt",
            b"/%2e./secret.txt", b"/css/../../secret.txt", b"/css/%2e%2e/%2e%2e/secret.txt",
            b"/..%2fsecret.txt", b"/..%2Fsecret.txt", b"/%2e%2e%2fsecret.txt", b"/..\\secret.txt",
            b"/..%5csecret.txt", b"/%5c..%5csecret.txt", b"/css/..%00/secret.txt", b"/%00../secret.txt",
            b"//..//secret.txt", b"/./../secret.txt", b"/%252e%252e/secret.txt", b"/link-out.txt",
            b"/linkdir/secret.txt", b"/css/%2e%2e/%2e%2e/outside/secret.txt", b"/..", b"/%2e%2e",
            b"/css/site.css/../../secret.txt", b"/%c0%ae%c0%ae/secret.txt", b"/..;/secret.txt",
        ]
        for path in attempts:
            for method in (b"GET", b"HEAD"):
                r = raw(srv, method + b" " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                self.assertNotIn(SECRET, r.body, path)
                php = r.status == 200 and r.header("Content-Type") == "application/json"  # a hidden name: PHP's
                self.assertTrue(r.status in (400, 403, 404) or php, (path, r.status, r.body))
        # Absolute-form targets go through the same checks.
        r = raw(srv, b"GET http://x/%2e%2e/secret.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(r.status, 403)
        # A symlink that stays inside the root is served; follow_symlinks lets one lead outside.
        self.assertEqual(self.get(srv, "/link-in.txt")[2], b"inside target\n")
        srv.close()
        srv = self.server({"follow_symlinks": True})
        self.assertEqual(self.get(srv, "/link-out.txt")[2], SECRET)

    def test_hidden_files_are_never_served(self):
        srv = self.server()
        for path in ("/.env", "/.git/config", "/css/.hidden.css", "/.git/", "/%2eenv"):
            self.assertPhp(srv, path)  # PHP's to answer (its router says 404)
        srv.close()
        srv = self.server({"on_forbidden": "403"})
        for path in ("/.env", "/.git/config", "/css/.hidden.css"):
            status, _, body = self.get(srv, path)
            self.assertEqual(status, 403, path)
            self.assertNotIn(SECRET, body)

    def test_symlinks_to_hidden_files_are_refused_as_the_hidden_files_are(self):
        """The hidden-file rule holds for what a symlink resolves to, for every component of the path: a file
        symlink to a dotfile, a directory symlink to a dot-directory, one in a subdirectory, a chain, and a
        symlink to a name whose extension http.static.forbid refuses."""
        pub = self.pub
        os.symlink(".env", os.path.join(pub, "env.txt"))
        os.symlink(".git", os.path.join(pub, "pub"))  # a directory symlink to a dot-directory
        os.symlink(".hidden.css", os.path.join(pub, "css", "shown.css"))  # in a subdirectory
        os.symlink("../.git/config", os.path.join(pub, "inner", "cfg.txt"))  # up and into one
        os.symlink("env.txt", os.path.join(pub, "chain.txt"))  # chain.txt -> env.txt -> .env
        os.symlink("pub", os.path.join(pub, "chain-dir"))  # chain-dir -> pub -> .git
        os.symlink("script.php", os.path.join(pub, "script.txt"))  # .php is forbidden below
        os.symlink("inner", os.path.join(pub, "in-dir"))  # an ordinary directory symlink
        with open(os.path.join(pub, ".git", "index.html"), "wb") as f:
            f.write(SECRET + b" git index")
        refused = ["/env.txt", "/pub/config", "/pub/", "/pub", "/css/shown.css", "/inner/cfg.txt",
                   "/chain.txt", "/chain-dir/config", "/chain-dir/index.html", "/script.txt"]
        srv = self.server({"forbid": [".php"]})
        for path in refused + ["/.env"]:
            self.assertPhp(srv, path)  # PHP's to answer, as the direct URL of the dotfile is
        srv.close()
        srv = self.server({"forbid": [".php"], "on_forbidden": "403", "on_missing": "404"})
        for path in refused + ["/.env", "/.git/config"]:
            for method in ("GET", "HEAD"):
                status, _, body = self.get(srv, path, method=method)
                self.assertEqual(status, 403, (method, path, body))
                self.assertNotIn(SECRET, body, path)
        # Symlinks to ordinary files and directories are served as before.
        self.assertEqual(self.get(srv, "/link-in.txt")[:3:2], (200, b"inside target\n"))
        self.assertEqual(self.get(srv, "/in-dir/target.txt")[:3:2], (200, b"inside target\n"))
        self.assertEqual(self.get(srv, "/notes.txt")[:3:2], (200, b"plain notes\n"))

    def test_follow_symlinks_still_refuses_hidden_targets_outside_the_root(self):
        os.makedirs(os.path.join(self.base.name, ".private"))
        with open(os.path.join(self.base.name, ".private", "key.txt"), "wb") as f:
            f.write(SECRET + b" private key")
        os.symlink(os.path.join(self.base.name, ".private", "key.txt"), os.path.join(self.pub, "key.txt"))
        os.symlink(os.path.join(self.base.name, ".private"), os.path.join(self.pub, "priv"))
        srv = self.server({"follow_symlinks": True, "on_forbidden": "403"})
        for path in ("/key.txt", "/priv/key.txt"):
            status, _, body = self.get(srv, path)
            self.assertEqual(status, 403, path)
            self.assertNotIn(SECRET, body)
        self.assertEqual(self.get(srv, "/link-out.txt")[2], SECRET)  # outside, not hidden: followed

    # ---------------------------------------------------------------- directories and fall-through

    def test_directory_index_and_redirect(self):
        srv = self.server()
        status, h, _ = self.get(srv, "/docs?a=1&b=2")
        self.assertEqual(status, 301)
        self.assertEqual(h["location"], "/docs/?a=1&b=2")
        self.assertEqual(self.get(srv, "/docs/")[2], b"<h1>docs</h1>\n")
        # "//evil.example" is a directory here, but its redirect must not name another site.
        os.makedirs(os.path.join(self.pub, "evil.example"))
        with open(os.path.join(self.pub, "evil.example", "index.html"), "wb") as f:
            f.write(b"x")
        for target in (b"//evil.example", b"///evil.example?q=1"):
            r = raw(srv, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertEqual(r.status, 301, target)
            self.assertTrue(r.header("Location").startswith("/evil.example/"), r.header("Location"))
        self.assertEqual(self.get(srv, "/")[2], b"<h1>home</h1>\n")
        self.assertEqual(self.assertPhp(srv, "/empty/")["path"], "/empty/")  # no index: PHP
        self.assertEqual(self.assertPhp(srv, "/empty")["path"], "/empty")
        self.assertEqual(self.assertPhp(srv, "/notes.txt/")["path"], "/notes.txt/")
        srv.close()
        srv = self.server({"index": ["missing.html"], "on_missing": "404"})
        self.assertEqual(self.get(srv, "/docs/")[0], 404)
        self.assertEqual(self.get(srv, "/nothing-here.css")[0], 404)

    def test_php_gets_what_is_not_a_static_file(self):
        srv = self.server({"forbid": [".php", "TXT"]})
        self.assertEqual(self.assertPhp(srv, "/missing.css")["path"], "/missing.css")
        d = self.assertPhp(srv, "/form.html", method="POST")  # other methods are PHP's
        self.assertEqual(d["method"], "POST")
        self.assertEqual(self.assertPhp(srv, "/script.php")["path"], "/script.php")  # forbidden extension
        self.assertEqual(self.assertPhp(srv, "/notes.txt")["path"], "/notes.txt")  # forbid is case-blind
        srv.close()
        srv = self.server({"allow": [".css"], "on_forbidden": "403"})
        self.assertEqual(self.get(srv, "/css/site.css")[0], 200)
        self.assertEqual(self.get(srv, "/notes.txt")[0], 403)
        srv.stop()
        # Without "static" in http.middleware the section does nothing.
        srv = Server({"http": {"static": {"dir": self.pub}}})
        srv.start()
        self.addCleanup(srv.close)
        self.addCleanup(srv.stop)
        self.assertPhp(srv, "/css/site.css")

    def test_precompressed_siblings(self):
        for suffix, data in ((".br", b"BROTLI-BYTES"), (".gz", b"GZIP-BYTES")):
            with open(os.path.join(self.pub, "css/site.css" + suffix), "wb") as f:
                f.write(data)
        srv = self.server({"precompressed": True})
        cases = {"br, gzip": ("br", b"BROTLI-BYTES"), "gzip": ("gzip", b"GZIP-BYTES"),
                 "br;q=0, gzip;q=0.5": ("gzip", b"GZIP-BYTES"), "identity": (None, CSS), "": (None, CSS),
                 "*": ("br", b"BROTLI-BYTES"), "gzip;q=0, *;q=0": (None, CSS)}
        etags = set()
        for accept, (coding, body) in cases.items():
            status, h, got = self.get(srv, "/css/site.css", {"Accept-Encoding": accept} if accept else {})
            self.assertEqual((status, got), (200, body), accept)
            self.assertEqual(h.get("content-encoding"), coding, accept)
            self.assertEqual(h["content-type"], "text/css; charset=utf-8", accept)
            self.assertEqual(h["vary"], "Accept-Encoding", accept)
            etags.add((coding, h["etag"]))
        self.assertEqual(len({e for _, e in etags}), 3)  # one ETag per representation
        self.assertNotIn("vary", self.get(srv, "/notes.txt", {"Accept-Encoding": "br"})[1])


if __name__ == "__main__":
    unittest.main()
