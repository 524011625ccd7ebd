"""Forms the server parses (docs/protocol.md §3): urlencoded bodies reach PHP as the field tree with
parsed: true, by PHP's naming rules, in both context codecs; limits answer 400/413 naming the key;
http.raw_body turns parsing off."""
import json
import os
import subprocess
import unittest

from harness import PHP_DIR, Server


def json_codec_worker():
    """echo.php under `php -n`: no ext-msgpack, so the worker speaks JSON contexts."""
    return {"server": {"command": "php -n " + os.path.join(PHP_DIR, "echo.php")}}


class FormsTest(unittest.TestCase):
    def post(self, srv, body, ctype="application/x-www-form-urlencoded", path="/form"):
        return srv.request("POST", path, body=body, headers={"Content-Type": ctype})

    def check_tree(self, srv, codec):
        status, _, body = self.post(srv, b"a=1&b[]=2&b[]=3&c[x][y]=4&d[][k]=5&d[][k]=6&e.f+g=%41&a=7")
        self.assertEqual(status, 200, body)
        d = json.loads(body)
        self.assertEqual(d["codec"], codec)
        self.assertTrue(d["parsed"])
        self.assertEqual(d["form"], {"a": "7", "b": ["2", "3"], "c": {"x": {"y": "4"}},
                                     "d": [{"k": "5"}, {"k": "6"}], "e_f_g": "A"})
        # The same tree PHP's own parse_str builds from the same body.
        php = json.loads(subprocess.run(
            ["php", "-r", "parse_str($argv[1], $r); echo json_encode($r);",
             "a=1&b[]=2&b[]=3&c[x][y]=4&d[][k]=5&d[][k]=6&e.f+g=%41&a=7"],
            capture_output=True, check=True).stdout)
        self.assertEqual(d["form"], php)

    def test_urlencoded_form_is_parsed_for_msgpack_workers(self):
        with Server() as srv:
            self.check_tree(srv, "msgpack")

    def test_urlencoded_form_is_parsed_for_json_workers(self):
        with Server(json_codec_worker()) as srv:
            self.check_tree(srv, "json")

    def test_the_psr7_bridge_gets_the_same_parsed_body(self):
        for cfg in ({}, {"server": {"command": "php -n " + os.path.join(PHP_DIR, "psr7_echo.php")}}):
            with Server(cfg, script="psr7_echo.php") as srv:
                status, _, body = self.post(srv, b"a=1&b[]=2&b[]=3&c[x][y]=4")
                self.assertEqual(status, 200, body)
                self.assertEqual(json.loads(body)["parsedBody"],
                                 {"a": "1", "b": ["2", "3"], "c": {"x": {"y": "4"}}}, cfg)

    def test_curl_dash_d_and_an_empty_form(self):
        with Server() as srv:
            out = srv.curl("-s", "-d", "a=1&b[]=2&b[]=3", srv.url("/ctx"))
            d = json.loads(out.stdout)
            self.assertEqual(d["form"], {"a": "1", "b": ["2", "3"]})
            status, _, body = self.post(srv, b"")
            self.assertEqual(status, 200)
            d = json.loads(body)
            self.assertTrue(d["parsed"])
            self.assertEqual(d["form"], [])  # PHP's empty array (the server sent {})

    def test_other_bodies_and_methods_stay_raw(self):
        with Server() as srv:
            d = json.loads(self.post(srv, b"a=1", ctype="text/plain")[2])
            self.assertFalse(d["parsed"])
            self.assertEqual(d["bodyLength"], 3)
            status, _, body = srv.request("OPTIONS", "/x", body=b"a=1",
                                          headers={"Content-Type": "application/x-www-form-urlencoded"})
            self.assertFalse(json.loads(body)["parsed"])

    def test_raw_body_turns_parsing_off(self):
        with Server({"http": {"raw_body": True}}) as srv:
            d = json.loads(self.post(srv, b"a=1&b=2")[2])
            self.assertFalse(d["parsed"])
            self.assertIsNone(d["form"])
            self.assertEqual(d["bodyLength"], 7)

    def test_limits_are_400_or_413_naming_the_key(self):
        cfg = {"http": {"limits": {"max_form_fields": 3, "max_form_depth": 2, "max_form_size": "1KB"}}}
        with Server(cfg) as srv:
            status, _, body = self.post(srv, b"a=1&b=2&c=3&d=4")
            self.assertEqual(status, 400)
            self.assertIn(b"http.limits.max_form_fields", body)
            self.assertTrue(srv.wait_for_log("http.limits.max_form_fields"), srv.stderr())
            status, _, body = self.post(srv, b"a[b][c][d]=1")
            self.assertEqual(status, 400)
            self.assertIn(b"http.limits.max_form_depth", body)
            status, _, body = self.post(srv, b"a=" + b"x" * 2000)
            self.assertEqual(status, 413)
            self.assertIn(b"http.limits.max_form_size", body)
            # Within the limits the same server still answers.
            self.assertEqual(json.loads(self.post(srv, b"a[b][c]=1")[2])["form"], {"a": {"b": {"c": "1"}}})

    def test_forms_count_against_the_memory_budget_for_bodies(self):
        with Server({"http": {"limits": {"max_body_memory": "4KB"}}}) as srv:
            status, headers, _ = self.post(srv, b"a=" + b"x" * 8000)
            self.assertEqual(status, 503)
            self.assertIn("Retry-After", dict(headers))
            self.assertTrue(srv.wait_for_log("http.limits.max_body_memory"), srv.stderr())
            # The budget came back: a small form still works.
            self.assertEqual(json.loads(self.post(srv, b"a=1")[2])["form"], {"a": "1"})


if __name__ == "__main__":
    unittest.main()
