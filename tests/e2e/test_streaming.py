"""Streaming from Ferry's PHP library (StreamedResponse, Worker::stream(), earlyHints(), SSE) through the
server, in both context codecs."""
import os
import socket
import unittest

from harness import HOST, PHP_DIR, Reader, Server

CODECS = ({}, {"server": {"command": "php -n " + os.path.join(PHP_DIR, "echo.php")}})  # msgpack, then JSON


class StreamingTest(unittest.TestCase):
    def test_server_sent_events(self):
        for cfg in CODECS:
            with Server(cfg) as srv:
                s = socket.create_connection((HOST, srv.port), timeout=10)
                self.addCleanup(s.close)
                s.sendall(b"GET /sse?n=3 HTTP/1.1\r\nHost: x\r\n\r\n")
                r = Reader(s).read_response()
                self.assertEqual(r.status, 200)
                self.assertEqual(r.header("Content-Type"), "text/event-stream")
                self.assertEqual(r.header("Transfer-Encoding"), "chunked")
                self.assertEqual(r.body, b"".join(
                    b"event: tick\nid: %d\ndata: line %d\ndata: second line\n\n" % (i, i) for i in range(1, 4)))
                # Seven events: the fifth asked for a PONG, and the worker serves the next request.
                s.sendall(b"GET /sse?n=7 HTTP/1.1\r\nHost: x\r\n\r\n")
                self.assertEqual(Reader(s).read_response().body.count(b"event: tick"), 7)

    def test_early_hints_from_the_library(self):
        for cfg in CODECS:
            with Server(cfg) as srv:
                s = socket.create_connection((HOST, srv.port), timeout=10)
                self.addCleanup(s.close)
                s.sendall(b"GET /hints HTTP/1.1\r\nHost: x\r\n\r\n")
                rd = Reader(s)
                first = rd.read_response()
                self.assertEqual(first.status, 103)
                self.assertEqual(len(first.header_all("Link")), 2)
                final = rd.read_response()
                self.assertEqual((final.status, final.body), (200, b"hinted\n"))
                # HTTP/1.0 clients get no 1xx.
                s2 = socket.create_connection((HOST, srv.port), timeout=10)
                self.addCleanup(s2.close)
                s2.sendall(b"GET /hints HTTP/1.0\r\n\r\n")
                self.assertEqual(Reader(s2).read_response().status, 200)

    def test_exec_ttl_times_a_stream_until_its_head(self):
        # Issue 41 item 8: exec_ttl (60 s by default) bounds the wait for a response's head; a stream that has
        # begun is a response PHP goes on with on purpose, and its client's leaving is what stops it. 50 chunks
        # 20 ms apart (1 s) pass an exec_ttl of 300 ms whole.
        cfg = {"server": {"command": "php " + os.path.join(PHP_DIR, "stream.php")},
               "http": {"pool": {"num_workers": 1, "supervisor": {"exec_ttl": "300ms", "watch_tick": "100ms"}}}}
        with Server(cfg) as srv:
            s = socket.create_connection((HOST, srv.port), timeout=10)
            self.addCleanup(s.close)
            s.sendall(b"GET /stream-long HTTP/1.1\r\nHost: x\r\n\r\n")
            r = Reader(s).read_response()
            self.assertEqual(r.status, 200)
            self.assertEqual(len(r.body), 50 * 1024, srv.stderr()[-2000:])
            self.assertNotIn("exec_ttl", srv.stderr())


if __name__ == "__main__":
    unittest.main()
