"""Trusted proxies (http.trusted_subnets, RoadRunner's proxy_ip_parser): the client address and scheme
from a trusted peer's headers; the same headers from anyone else are ignored."""
import json
import subprocess
import unittest

from harness import BIN, Server

SPOOF = {"X-Forwarded-For": "203.0.113.7, 10.0.0.1", "X-Forwarded-Proto": "https", "X-Real-IP": "198.51.100.2"}


class ProxiesTest(unittest.TestCase):
    def ctx(self, srv, headers):
        status, _, body = srv.request("GET", "/ctx", headers=headers)
        self.assertEqual(status, 200, body)
        return json.loads(body)

    def test_nobody_is_trusted_by_default(self):
        with Server() as srv:
            d = self.ctx(srv, SPOOF)
            self.assertEqual(d["remoteAddr"], "127.0.0.1")
            self.assertTrue(d["uri"].startswith("http://"), d["uri"])

    def test_a_trusted_peer_sets_the_client_address_and_scheme(self):
        with Server({"http": {"trusted_subnets": ["127.0.0.0/8", "::1"]}}) as srv:
            d = self.ctx(srv, SPOOF)
            self.assertEqual(d["remoteAddr"], "203.0.113.7")  # the left-most X-Forwarded-For entry
            self.assertTrue(d["uri"].startswith("https://"), d["uri"])
            d = self.ctx(srv, {"Forwarded": 'for="[2001:db8::5]:443";proto=https'})
            self.assertEqual(d["remoteAddr"], "2001:db8::5")
            d = self.ctx(srv, {"X-Forwarded-For": "not-an-ip"})
            self.assertEqual(d["remoteAddr"], "127.0.0.1")  # garbage is not taken
            d = self.ctx(srv, {})
            self.assertEqual(d["remoteAddr"], "127.0.0.1")

    def test_an_untrusted_peer_cannot_spoof(self):
        with Server({"http": {"trusted_subnets": ["10.0.0.0/8"]}}) as srv:
            d = self.ctx(srv, SPOOF)
            self.assertEqual(d["remoteAddr"], "127.0.0.1")
            self.assertTrue(d["uri"].startswith("http://"), d["uri"])

    def test_a_bad_subnet_is_a_config_error_naming_key_and_value(self):
        srv = Server({"http": {"trusted_subnets": ["10.0.0.0/8", "10.0.0.0/33"]}})
        self.addCleanup(srv.close)
        r = subprocess.run([BIN, "config", "-c", srv.config_path], capture_output=True, text=True, timeout=20)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("http.trusted_subnets", r.stderr)
        self.assertIn("10.0.0.0/33", r.stderr)


if __name__ == "__main__":
    unittest.main()
