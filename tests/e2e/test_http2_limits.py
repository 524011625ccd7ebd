"""HTTP/2's limits and the known attacks (issue 45, docs/http2.md), with raw frames from tests/e2e/h2peer.py
(Python's h2, hyperframe and hpack): rapid reset (CVE-2023-44487) costs no PHP request and past its rate closes
the connection with ENHANCE_YOUR_CALM; streams reset while PHP runs them still count against
max_concurrent_streams; CONTINUATION flood (CVE-2024-27316); an HPACK bomb (431); SETTINGS and PING floods; more
streams than advertised; a window held at zero (the write timeout resets the stream); incomplete requests and idle
connections (GOAWAY). Every case asserts its close or answer, and its log line."""

import socket
import time
import unittest

import h2peer
from clients import scrape
from h2peer import CANCEL, ENHANCE_YOUR_CALM, NO_ERROR, PROTOCOL_ERROR, REFUSED_STREAM, Peer, Reset
from harness import HOST, ServerTestCase
from tlscase import pki

MAX_STREAMS = 8


def total(srv, name, **labels):
    """The sum of a metric's samples whose labels include `labels`."""
    return sum(v for (n, ls), v in scrape(srv).items()
               if n == name and all((k, v2) in ls for k, v2 in labels.items()))


class Limits(ServerTestCase):
    CONFIG = {
        "http": {
            "middleware": ["static"], "static": {"dir": pki().path("public")},
            "http2": {"h2c": True, "max_concurrent_streams": MAX_STREAMS},
            "timeouts": {"write": "2s", "read_body": "2s", "idle": "3s"},
            "limits": {"max_header_size": "16KB"},
        },
        "metrics": {"address": f"{HOST}:0"},
        "logs": {"level": "debug"},
    }

    def peer(self, **kw):
        p = Peer(**kw).connect(HOST, self.server.port)
        self.addCleanup(p.close)
        return p

    def php_requests(self):
        return total(self.server, "ferry_pool_jobs_total")

    def test_rapid_reset_costs_no_php_request_and_past_its_rate_closes_with_calm(self):
        before = self.php_requests()
        r = h2peer.rapid_reset(self.peer(), 900)
        self.assertFalse(r["closed"], r)
        self.assertEqual(r["completed"], 0, r)
        # HEADERS and their RST_STREAM in one read are never dispatched; a read may end between the two.
        self.assertLessEqual(self.php_requests() - before, 5)
        abuse = total(self.server, "ferry_limit_refusals_total", limit="http2_abuse")
        r = h2peer.rapid_reset(self.peer(), 3000)
        self.assertTrue(r["closed"], r)
        self.assertEqual(r["goaway"], ENHANCE_YOUR_CALM, r)
        self.server.wait_for_log("(rapid reset): closing with ENHANCE_YOUR_CALM")
        self.assertEqual(total(self.server, "ferry_limit_refusals_total", limit="http2_abuse"), abuse + 1)

    def test_streams_reset_while_php_runs_them_still_count_against_max_concurrent_streams(self):
        p = self.peer()
        slow = [p.request("GET", f"/sleep?ms=1500&i={i}") for i in range(MAX_STREAMS)]
        p.read_events(timeout=0.3)  # dispatched: PHP works on them
        for sid in slow:
            p.conn.reset_stream(sid, CANCEL)
        p._write(p.conn.data_to_send())
        more = [p.request("GET", f"/more{i}") for i in range(MAX_STREAMS)]
        for sid in more:
            with self.assertRaises(Reset) as e:
                p.response(sid, timeout=5)
            self.assertEqual(e.exception.code, REFUSED_STREAM)
        time.sleep(1.5)
        status, _, body, _, _ = p.response(p.request("GET", "/after"), timeout=5)
        self.assertEqual(status, 200, body)

    def test_a_slow_request_does_not_hold_the_others_on_its_connection(self):
        p = self.peer()
        slow = p.request("GET", "/sleep?ms=1000")
        t0 = time.monotonic()
        status, _, _, _, _ = p.response(p.request("GET", "/fast"), timeout=5)
        self.assertEqual(status, 200)
        self.assertLess(time.monotonic() - t0, 0.8)
        self.assertEqual(p.response(slow, timeout=5)[0], 200)

    def test_cookies_split_by_http2_reach_php_as_one_header(self):
        p = self.peer()
        status, _, body, _, _ = p.response(p.request("GET", "/c", [("cookie", "a=1"), ("cookie", "b=2")]))
        self.assertEqual(status, 200)
        self.assertIn(b'"cookies":{"a":"1","b":"2"}', body)

    def test_continuation_flood_is_closed_with_calm(self):
        r = h2peer.continuation_flood(self.peer())
        self.assertTrue(r["closed"], r)
        self.assertEqual(r["goaway"], ENHANCE_YOUR_CALM, r)
        self.server.wait_for_log("CONTINUATION frames")

    def test_hpack_bomb_decodes_to_no_more_than_max_header_size(self):
        r = h2peer.hpack_bomb(self.peer())
        self.assertGreater(r["decoded_bytes"], 1000 * r["wire_bytes"])
        self.assertEqual(r["status"], 431, r)
        self.server.wait_for_log("431 the request's header fields are larger than http.limits.max_header_size")
        many = [(f"x-h{i}", "v") for i in range(400)]  # more fields than http.limits.max_headers (256)
        p = self.peer()
        self.assertEqual(p.response(p.request("GET", "/many", many))[0], 431)

    def test_settings_flood_is_closed(self):
        r = h2peer.settings_flood(self.peer())
        self.assertTrue(r["closed"], r)
        self.server.wait_for_log("Flooding was detected")

    def test_ping_flood_from_a_client_that_does_not_read_is_closed(self):
        # The kernel holds little for a client that never reads: unanswered PINGs pile up in the server until
        # nghttp2's cap on queued acknowledgements (1000) ends the connection.
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect((HOST, self.server.port))
        self.addCleanup(s.close)
        from hyperframe.frame import PingFrame, SettingsFrame
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + SettingsFrame(0).serialize())
        ping = PingFrame(0, opaque_data=b"12345678").serialize() * 1000
        s.settimeout(0.5)
        deadline = time.monotonic() + 15
        try:
            while time.monotonic() < deadline:
                s.send(ping)
        except (socket.timeout, OSError):
            pass
        self.server.wait_for_log("Flooding was detected", timeout=10)
        s.settimeout(10)  # now read: what was queued, then the end
        try:
            while s.recv(65536):
                pass
        except ConnectionResetError:
            pass

    def test_more_streams_than_advertised_is_a_protocol_error(self):
        r = h2peer.too_many_streams(self.peer(), 2, "POST", "/")
        self.assertEqual(r["max_concurrent"], MAX_STREAMS)
        self.assertTrue(r["closed"], r)
        self.assertEqual(r["goaway"], PROTOCOL_ERROR, r)
        self.server.wait_for_log("max concurrent streams exceeded")

    def test_a_window_held_at_zero_resets_the_stream_at_the_write_timeout(self):
        p = self.peer(auto_ack=False, initial_window=0)
        r = h2peer.zero_window(p, "/large.bin", timeout=8)
        self.assertEqual(r["reset"], CANCEL, r)
        self.assertEqual(r["body_bytes"], 0)
        self.assertGreaterEqual(r["seconds"], 1.5)
        self.server.wait_for_log("the client's flow-control window stayed closed")

    def test_an_incomplete_request_and_an_idle_connection_end_with_goaway(self):
        p = self.peer()
        p.request("POST", "/never", [("content-length", "10")], end_stream=False)
        t0 = time.monotonic()
        p.read_events(until=lambda ev: p.closed, timeout=8)
        self.assertTrue(p.closed)
        self.assertEqual(p.goaway_code, NO_ERROR)
        self.assertGreaterEqual(time.monotonic() - t0, 1.5)
        self.server.wait_for_log("requests incomplete for http.timeouts.read_body")
        p = self.peer()
        t0 = time.monotonic()
        p.read_events(until=lambda ev: p.closed, timeout=8)
        self.assertTrue(p.closed)
        self.assertEqual(p.goaway_code, NO_ERROR)
        self.assertGreaterEqual(time.monotonic() - t0, 2.5)

    def test_a_stop_finishes_streams_in_flight_and_says_goaway(self):
        srv = self.start_server({"http": {"http2": {"h2c": True}}})
        p = Peer().connect(HOST, srv.port)
        self.addCleanup(p.close)
        slow = p.request("GET", "/sleep?ms=800")
        p.read_events(timeout=0.3)
        srv.terminate()
        status, _, _, _, _ = p.response(slow, timeout=10)
        self.assertEqual(status, 200, "the request in flight is answered")
        self.assertEqual(p.goaway(timeout=5), NO_ERROR)
        p.read_events(until=lambda ev: p.closed, timeout=10)
        self.assertTrue(p.closed)
        srv.stop()  # exit code 0, no worker left, no forced stop of a loop

    def test_heads_of_streams_waiting_for_their_bodies_take_from_max_head_memory(self):
        srv = self.start_server({"http": {"http2": {"h2c": True},
                                          "limits": {"max_head_memory": "256KB", "max_header_size": "64KB"}}})
        p = Peer().connect(HOST, srv.port)
        self.addCleanup(p.close)
        pad = [("x-pad", "p" * 60000)]
        sids = [p.request("POST", f"/w{i}", pad, end_stream=False) for i in range(8)]  # ~480 KB of heads
        p.read_events(timeout=1)
        refused = [sid for sid in sids if p.stream(sid).status == 503]
        self.assertGreaterEqual(len(refused), 4, "past 256 KB the heads are refused")
        self.assertLessEqual(len(refused), 5, "the first ones are held")
        srv.wait_for_log("http.limits.max_head_memory is spent")
        p.close()  # the held heads go with their connection: the budget is whole again
        q = Peer().connect(HOST, srv.port)
        self.addCleanup(q.close)
        time.sleep(0.3)
        status, _, _, _, _ = q.response(q.request("GET", "/after", pad))
        self.assertEqual(status, 200)

    def test_a_bad_preface_is_closed(self):
        s = socket.create_connection((HOST, self.server.port), timeout=5)
        self.addCleanup(s.close)
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n" + b"\0" * 64)
        data = b""
        try:
            while chunk := s.recv(4096):
                data += chunk
        except ConnectionResetError:
            pass
        self.assertNotIn(b"HTTP/1.1", data)
        self.server.wait_for_log("Invalid client magic")


if __name__ == "__main__":
    unittest.main()
