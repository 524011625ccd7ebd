"""Compression of PHP responses (issue 45, docs/compression.md): http.middleware "gzip" sends gzip or brotli as
the client's Accept-Encoding ranks them — whole bodies with their compressed Content-Length, streams flushed at
each worker chunk (decodable as they come), bodies over 64 KiB in slices — and leaves alone what must not be
touched (small bodies, other media types, Content-Encoding or Content-Range already set, no-transform, HEAD,
204/304). Real clients: curl --compressed (HTTP/1.1 and h2c), raw sockets decoded by zlib and brotli."""

import gzip
import socket
import sys
import threading
import time
import zlib

from clients import Reader, metric
from harness import HOST, ServerTestCase

try:
    import brotli
except ImportError:  # a python3 other than Debian's (pyenv) still finds the python3-brotli package
    sys.path.append("/usr/lib/python3/dist-packages")
    import brotli

UNIT = b'{"id":1234,"name":"ferry","tags":["php","c++","http"],"ok":true},'


def body_of(size):  # what tests/php/compress.php sends for ?size=
    return (UNIT * (size // len(UNIT) + 1))[:size]


def decode(coding, data):
    if coding == "gzip":
        return gzip.decompress(data)
    if coding == "br":
        return brotli.decompress(data)
    assert coding is None, coding
    return data


class CompressionTest(ServerTestCase):
    SCRIPT = "compress.php"
    CONFIG = {"http": {"middleware": ["gzip"], "http2": {"h2c": True},
                       "pool": {"num_workers": 3}},
              "metrics": {"address": f"{HOST}:0"}}

    def get(self, query, accept="gzip, deflate, br", method="GET", headers=None):
        h = dict(headers or {})
        if accept is not None:
            h["Accept-Encoding"] = accept
        status, hdrs, body = self.server.request(method, "/?" + query, headers=h)
        return status, {k.lower(): v for k, v in hdrs}, body

    def test_gzip_and_brotli_as_the_client_ranks_them(self):
        want = body_of(20000)
        for accept, coding in [("gzip, deflate, br", "gzip"),  # a tie (browsers): gzip, the faster
                               ("br;q=1.0, gzip;q=0.8", "br"),
                               ("br", "br"), ("gzip", "gzip"), ("x-gzip", "gzip"), ("*", "gzip"),
                               ("br;q=0, gzip", "gzip"), ("identity", None), (None, None)]:
            status, h, body = self.get("size=20000&etag=%22v1%22", accept=accept)
            self.assertEqual(status, 200)
            self.assertEqual(h.get("content-encoding"), coding, accept)
            self.assertEqual(decode(coding, body), want, accept)
            self.assertEqual(h["vary"], "Accept-Encoding", accept)  # also when not compressed: caches know
            self.assertEqual(int(h["content-length"]), len(body))
            self.assertEqual(h["etag"], 'W/"v1"' if coding else '"v1"', accept)
            if coding:
                self.assertLess(len(body), 1000)

    def test_curl_decodes_what_it_gets_over_http1_and_h2c(self):
        want = body_of(50000)
        for proto in ("--http1.1", "--http2-prior-knowledge"):
            for accept in ("gzip", "br"):
                r = self.server.curl(proto, "--compressed", "-H", f"Accept-Encoding: {accept}", "-D", "-",
                                     self.server.url("/?size=50000"))
                self.assertEqual(r.returncode, 0, r.stderr)
                head, _, body = r.stdout.partition(b"\r\n\r\n")
                self.assertIn(f"content-encoding: {accept}".encode(), head.lower(), (proto, head))
                self.assertEqual(body, want, (proto, accept))

    def test_what_is_left_alone(self):
        cases = [
            ("size=1000", "below min_length (1024)", False),
            ("size=20000&type=image/png", "a media type not listed", False),
            ("size=20000&type=text/event-stream", "not listed by default", False),
            ("size=20000&cc=public,%20no-transform", "Cache-Control: no-transform", True),
            ("size=20000&cr=bytes%200-19999/40000&status=206", "a range", True),
            ("size=20000&status=206", "206", True),
        ]
        for query, why, _ in cases:
            status, h, body = self.get(query)
            self.assertNotIn("content-encoding", h, why)
            self.assertNotIn("vary", h, why)
            self.assertEqual(body, body_of(int(query.split("&")[0][5:])), why)
        # Content-Encoding set by PHP: its bytes and its header go as they are, once.
        status, h, body = self.get("size=20000&ce=br")
        self.assertEqual((h["content-encoding"], body), ("br", body_of(20000)))
        # HEAD, 204, 304: no body, nothing compressed
        status, h, body = self.get("size=20000", method="HEAD")
        self.assertEqual((status, body), (200, b""))
        self.assertNotIn("content-encoding", h)
        for code in (204, 304):
            status, h, body = self.get(f"size=20000&status={code}")
            self.assertEqual((status, body), (code, b""))
            self.assertNotIn("content-encoding", h)
        # other statuses with bodies are compressed like 200
        status, h, body = self.get("size=20000&status=404")
        self.assertEqual((status, h["content-encoding"], gzip.decompress(body)), (404, "gzip", body_of(20000)))

    def test_a_stream_is_flushed_compressed_at_each_worker_chunk(self):
        # 5 chunks 300 ms apart: the first must decode on its own long before the stream ends.
        for coding in ("gzip", "br"):
            s = self.sock()
            s.sendall(f"GET /?size=50000&stream=5&ms=300 HTTP/1.1\r\nHost: x\r\nAccept-Encoding: {coding}\r\n\r\n"
                      .encode())
            rd = Reader(s)
            started = time.monotonic()
            _, status, _, headers = rd.read_head()
            h = {k.lower(): v for k, v in headers}
            self.assertEqual((status, h["content-encoding"], h["transfer-encoding"]), (200, coding, "chunked"))
            dec = zlib.decompressobj(16 + 15) if coding == "gzip" else brotli.Decompressor()
            feed = dec.decompress if coding == "gzip" else dec.process
            got, first_at = b"", None
            while True:
                size = int(rd.read_until(b"\r\n").strip(), 16)
                if size == 0:
                    rd.read_until(b"\r\n")
                    break
                got += feed(rd.read_exact(size))
                rd.read_exact(2)
                if first_at is None and got:
                    first_at = time.monotonic() - started
                    self.assertEqual(got, body_of(50000)[:10000], "the first chunk, whole, at once")
            total = time.monotonic() - started
            self.assertEqual(got, body_of(50000))
            self.assertLess(first_at, total - 0.8, (first_at, total))

    def test_trailers_follow_a_compressed_stream(self):
        s = self.sock()
        s.sendall(b"GET /?size=30000&stream=3&trailer=1 HTTP/1.1\r\nHost: x\r\nTE: trailers\r\n"
                  b"Accept-Encoding: gzip\r\n\r\n")
        rd = Reader(s)
        _, status, _, headers = rd.read_head()
        self.assertIn(("Content-Encoding", "gzip"), headers)
        data = b""
        while True:
            size = int(rd.read_until(b"\r\n").strip(), 16)
            if size == 0:
                break
            data += rd.read_exact(size)
            rd.read_exact(2)
        trailer = rd.read_until(b"\r\n\r\n")
        self.assertEqual(gzip.decompress(data), body_of(30000))
        self.assertEqual(trailer, b"X-Checksum: %d\r\n\r\n" % zlib.crc32(body_of(30000)))

    def test_large_bodies_go_in_slices_and_the_loop_serves_others_meanwhile(self):
        big = body_of(6_000_000)
        results = {}

        def fetch(i):
            status, h, body = self.get("size=6000000")
            results[i] = (status, h.get("content-encoding"), h.get("transfer-encoding"), decode("gzip", body))

        threads = [threading.Thread(target=fetch, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        small_times = []
        for _ in range(10):  # small answers keep coming while the big ones are compressed
            t0 = time.monotonic()
            status, h, body = self.get("size=2000")
            small_times.append(time.monotonic() - t0)
            self.assertEqual((status, gzip.decompress(body)), (200, body_of(2000)))
        for t in threads:
            t.join(60)
        for i in range(3):
            self.assertEqual(results[i][:3], (200, "gzip", "chunked"))  # over 64 KiB: streamed, sliced
            self.assertEqual(results[i][3], big)
        self.assertLess(max(small_times), 2.0, small_times)

    def test_metrics_count_responses_and_bytes(self):
        before = metric(self.server, "ferry_http_compressed_responses_total", encoding="br")
        bytes_in = metric(self.server, "ferry_http_compression_bytes_total", stage="in")
        self.get("size=20000", accept="br")
        self.get("size=20000&stream=4", accept="br")
        self.assertEqual(metric(self.server, "ferry_http_compressed_responses_total", encoding="br"), before + 2)
        self.assertEqual(metric(self.server, "ferry_http_compression_bytes_total", stage="in"), bytes_in + 40000)
        self.assertEqual(metric(self.server, "ferry_http_compression_streams"), 0)


class StaticCompressionLimitsTest(ServerTestCase):
    """Static files being compressed hold encoders too: past http.compression.max_streams, the file as it is."""
    SCRIPT = "compress.php"

    @classmethod
    def setUpClass(cls):
        import os
        import tempfile
        cls.dir = tempfile.TemporaryDirectory(prefix="ferry-static-streams-")
        cls.data = b"".join(b"line %d of a text file that compresses, %x\n" % (i, i * 2654435761 % 2**32)
                            for i in range(20000))  # ~900 KB: 14 slices at gzip 6
        for i in range(8):
            with open(os.path.join(cls.dir.name, f"f{i}.txt"), "wb") as f:
                f.write(cls.data)
        cls.CONFIG = {"http": {"middleware": ["static"], "compression": {"max_streams": 1},
                               "static": {"dir": cls.dir.name, "compress": True, "compress_cache": "64MB"}},
                      "metrics": {"address": f"{HOST}:0"}}
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.dir.cleanup()

    def test_past_max_streams_files_go_as_they_are(self):
        results = {}

        def fetch(i):
            status, hdrs, body = self.server.request("GET", f"/f{i}.txt", headers={"Accept-Encoding": "gzip"})
            h = {k.lower(): v for k, v in hdrs}
            results[i] = (status, h.get("content-encoding"), body)

        threads = [threading.Thread(target=fetch, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        encodings = [results[i][1] for i in range(8)]
        for i in range(8):
            self.assertEqual(results[i][0], 200)
            self.assertEqual(decode(results[i][1], results[i][2]), self.data)
        self.assertIn("gzip", encodings)
        self.assertIn(None, encodings)  # at least one came while the one encoder was busy
        self.assertGreaterEqual(metric(self.server, "ferry_http_compression_streams_refused_total"), 1)
        self.assertEqual(metric(self.server, "ferry_http_compression_streams"), 0)


class CompressionLimitsTest(ServerTestCase):
    """max_streams, held bodies, clients that vanish mid-stream; and no middleware, no compression."""
    SCRIPT = "compress.php"
    CONFIG = {"http": {"middleware": ["gzip"], "pool": {"num_workers": 3},
                       "compression": {"max_streams": 1, "types": ["text/*"], "min_length": 100},
                       "limits": {"max_body_memory": "2MB"}},
              "metrics": {"address": f"{HOST}:0"}}

    def open_stream(self, query, accept="gzip"):
        s = self.sock()
        s.sendall(f"GET /?{query} HTTP/1.1\r\nHost: x\r\nAccept-Encoding: {accept}\r\n\r\n".encode())
        rd = Reader(s)
        _, status, _, headers = rd.read_head()
        return s, rd, {k.lower(): v for k, v in headers}

    def test_past_max_streams_a_stream_goes_uncompressed(self):
        refused = metric(self.server, "ferry_http_compression_streams_refused_total")
        s1, rd1, h1 = self.open_stream("type=text/plain&size=5000&stream=5&ms=200")
        s2, rd2, h2 = self.open_stream("type=text/plain&size=5000&stream=5&ms=200")
        self.assertEqual(h1.get("content-encoding"), "gzip")
        self.assertNotIn("content-encoding", h2)
        self.assertEqual(h2["vary"], "Accept-Encoding")
        self.assertEqual(metric(self.server, "ferry_http_compression_streams"), 1)
        self.assertEqual(metric(self.server, "ferry_http_compression_streams_refused_total"), refused + 1)
        s1.close()  # the client vanishes mid-stream: its slot is given back
        s2.close()
        deadline = time.monotonic() + 5
        while metric(self.server, "ferry_http_compression_streams") != 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(metric(self.server, "ferry_http_compression_streams"), 0)
        s3, rd3, h3 = self.open_stream("type=text/plain&size=5000&stream=2")
        self.assertEqual(h3.get("content-encoding"), "gzip")

    def test_a_body_held_in_the_worker_is_compressed_into_a_temp_file(self):
        # 3 MB over the 2 MB body budget: read from the worker's buffer, compressed to a temp file in slices,
        # sent with its Content-Length once the worker is free.
        status, hdrs, body = self.server.request("GET", "/?type=text/csv&size=3000000",
                                                 headers={"Accept-Encoding": "gzip"})
        h = {k.lower(): v for k, v in hdrs}
        self.assertEqual((status, h["content-encoding"]), (200, "gzip"))
        self.assertEqual(int(h["content-length"]), len(body))
        self.assertEqual(gzip.decompress(body), body_of(3000000))
        status, hdrs, body = self.server.request("GET", "/?type=text/csv&size=3000000",
                                                 headers={"Accept-Encoding": "br"})
        self.assertEqual(brotli.decompress(body), body_of(3000000))

    def test_configured_types_and_min_length(self):
        status, hdrs, body = self.server.request("GET", "/?type=application/json&size=5000",
                                                 headers={"Accept-Encoding": "gzip"})
        self.assertNotIn("Content-Encoding", dict(hdrs))  # not in types: [text/*]
        status, hdrs, body = self.server.request("GET", "/?type=text/anything&size=150",
                                                 headers={"Accept-Encoding": "gzip"})
        self.assertEqual(dict(hdrs)["Content-Encoding"], "gzip")
        self.assertEqual(gzip.decompress(body), body_of(150))

    def test_without_the_middleware_nothing_changes(self):
        srv = self.start_server({"http": {"middleware": ["sendfile"]}}, script="compress.php")
        status, hdrs, body = srv.request("GET", "/?size=20000", headers={"Accept-Encoding": "gzip, br"})
        h = {k.lower(): v for k, v in hdrs}
        self.assertNotIn("content-encoding", h)
        self.assertNotIn("vary", h)
        self.assertEqual(body, body_of(20000))


if __name__ == "__main__":
    import unittest
    unittest.main()


class StaticCompressionTest(ServerTestCase):
    """http.static.compress: text files compressed once per version into a bounded cache; ranges, other types,
    precompressed siblings and files too small or too large left as they are."""
    SCRIPT = "compress.php"

    @classmethod
    def setUpClass(cls):
        import os
        import tempfile
        cls.dir = tempfile.TemporaryDirectory(prefix="ferry-static-compress-")
        d = cls.dir.name
        cls.css = b"".join(b".c%d { color: #%06x; margin: %dpx }\n" % (i, i * 77 % 0xffffff, i % 40)
                           for i in range(3000))  # ~110 KB: two slices, under the cache's max_file
        cls.files = {"site.css": cls.css, "small.css": b"a{}" * 100, "photo.png": cls.css[:50000],
                     "huge.js": cls.css * 10, "pre.js": cls.css[:30000], "wide.css": cls.css * 3}
        for name, data in cls.files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        with open(os.path.join(d, "pre.js.gz"), "wb") as f:
            f.write(gzip.compress(cls.css[:30000]))
        cls.CONFIG = {"http": {"middleware": ["static"],
                               "static": {"dir": d, "compress": True, "precompressed": True,
                                          "compress_cache": "1MB"}},
                      "metrics": {"address": f"{HOST}:0"}}
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.dir.cleanup()

    def get(self, path, headers=None, method="GET"):
        status, hdrs, body = self.server.request(method, path, headers=headers)
        return status, {k.lower(): v for k, v in hdrs}, body

    def test_text_files_are_compressed_once_and_kept(self):
        for coding in ("gzip", "br"):
            status, h, body = self.get("/site.css", {"Accept-Encoding": coding})
            self.assertEqual((status, h["content-encoding"], h["vary"]), (200, coding, "Accept-Encoding"))
            self.assertEqual(int(h["content-length"]), len(body))
            self.assertEqual(decode(coding, body), self.css)
            self.assertTrue(h["etag"].startswith('W/'), h["etag"])
            self.assertNotIn("accept-ranges", h)
            # the same bytes again, from the cache; a conditional request gets 304
            status, h2, body2 = self.get("/site.css", {"Accept-Encoding": coding})
            self.assertEqual(body2, body)
            status, h3, _ = self.get("/site.css", {"Accept-Encoding": coding, "If-None-Match": h["etag"]})
            self.assertEqual(status, 304)
            status, h4, body4 = self.get("/site.css", {"Accept-Encoding": coding}, method="HEAD")
            self.assertEqual((body4, h4["content-length"]), (b"", h["content-length"]))
        self.assertGreater(metric(self.server, "ferry_static_compressed_bytes"), 0)
        # without Accept-Encoding: the file itself, with its strong validator and ranges
        status, h, body = self.get("/site.css")
        self.assertEqual((body, h["vary"], h.get("content-encoding")), (self.css, "Accept-Encoding", None))
        self.assertEqual(h["accept-ranges"], "bytes")

    def test_what_stays_as_it_is(self):
        status, h, body = self.get("/site.css", {"Accept-Encoding": "gzip", "Range": "bytes=0-99"})
        self.assertEqual((status, body, h.get("content-encoding")), (206, self.css[:100], None))
        # below min_length, not text, over 1 MiB, over a quarter of a loop's share of the 1 MB cache (it could
        # not be kept, and would be compressed again at every request)
        for path in ("/small.css", "/photo.png", "/huge.js", "/wide.css"):
            status, h, body = self.get(path, {"Accept-Encoding": "gzip, br"})
            self.assertEqual((status, h.get("content-encoding"), body), (200, None, self.files[path[1:]]), path)
        status, h, body = self.get("/pre.js", {"Accept-Encoding": "gzip, br"})  # its .gz sibling, as it is
        self.assertEqual((h["content-encoding"], gzip.decompress(body)), ("gzip", self.css[:30000]))
        with open(f"{self.dir.name}/pre.js.gz", "rb") as f:
            self.assertEqual(body, f.read())

    def test_a_changed_file_is_compressed_again_and_the_cache_stays_bounded(self):
        import os
        path = os.path.join(self.dir.name, "changing.css")
        for version in range(3):
            data = self.css[: 100000 + version * 1000]
            with open(path, "wb") as f:
                f.write(data)
            os.utime(path, (1_700_000_000 + version, 1_700_000_000 + version))
            deadline = time.monotonic() + 5
            while True:  # the file cache revalidates within its interval
                status, h, body = self.get("/changing.css", {"Accept-Encoding": "gzip"})
                if gzip.decompress(body) == data or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            self.assertEqual(gzip.decompress(body), data)
        # 1 MB over the loops: many distinct files never hold more
        for i in range(30):
            with open(os.path.join(self.dir.name, f"many{i}.css"), "wb") as f:
                f.write(self.css[: 60000 + i])
            status, h, body = self.get(f"/many{i}.css", {"Accept-Encoding": "br"})
            self.assertEqual(brotli.decompress(body), self.css[: 60000 + i])
        self.assertLessEqual(metric(self.server, "ferry_static_compressed_bytes"), 1024 * 1024)
