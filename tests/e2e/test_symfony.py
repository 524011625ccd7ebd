"""Symfony 5.4 from Debian's packages on Ferry (issue 42): examples/symfony's standard front controller run by
Ferry\\Runtime\\Runtime (symfony/runtime), booted once per worker; requests, sessions, uploads, streamed
responses, cookies, printed output, errors, and nothing of one request reaching the next."""

import hashlib
import json
import os
import re
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from frameworks import AppServer, Client, check_streamed_lines, copy_example
from harness import HOST, ROOT, Server, wait_until

HAVE_SYMFONY = os.path.isfile("/usr/share/php/Symfony/Component/Runtime/SymfonyRuntime.php") and \
    os.path.isfile("/usr/share/php/Symfony/Bundle/TwigBundle/autoload.php")


def copy_app(dest):
    """The example as a project of its own (its var/ — cache, sessions, uploads — in the test's directory)."""
    return copy_example("symfony", dest, ignore=("var",))


def symfony_config(app, workers=2):
    return {
        "server": {
            "command": f"php {app}/public/index.php",
            "env": {
                "APP_RUNTIME": "Ferry\\Runtime\\Runtime",
                "APP_ENV": "prod",
                "APP_DEBUG": "0",
            },
        },
        "http": {
            "middleware": ["static", "sendfile"],
            "static": {"dir": f"{app}/public", "forbid": [".php"]},
            "pool": {"num_workers": workers},
        },
    }


class SymfonyServer(AppServer):
    PREFIX = "ferry-symfony-"

    @classmethod
    def copy_app(cls, dest):
        return copy_app(dest)

    @classmethod
    def config(cls, app):
        return symfony_config(app)


@unittest.skipUnless(HAVE_SYMFONY, "Symfony from Debian (scripts/setup.sh installs php-symfony-*)")
class SymfonyTest(SymfonyServer):
    def test_kernel_boots_once_per_worker(self):
        c = self.client()
        seen = {}
        for _ in range(12):
            info = c.json("GET", "/api/info")
            self.assertEqual(info["framework"], "symfony")
            self.assertTrue(info["version"].startswith("5.4."), info)
            seen.setdefault(info["pid"], []).append(info["served"])
        self.assertLessEqual(len(seen), 2, seen)
        # each worker counts its own requests on: one kernel, booted once, served them all
        self.assertTrue(any(max(v) >= 6 for v in seen.values()), seen)
        for counts in seen.values():
            self.assertEqual(counts, sorted(counts))

    def test_twig_page_and_a_static_asset(self):
        c = self.client()
        status, r, body = c.request("GET", "/")
        self.assertEqual(status, 200, body[:300])
        self.assertIn(b"Symfony 5.4", body)
        self.assertIn(b'<span id="visits">1</span>', body)
        self.assertIn("PHPSESSID", c.cookies)
        # the session is a file of the app's var/sessions (framework.session.save_path), not of php.ini's
        self.assertTrue(os.path.isfile(os.path.join(self.app, "var", "sessions", "prod", "sess_" + c.cookies["PHPSESSID"])))
        status, r, body = c.request("GET", "/")
        self.assertIn(b'<span id="visits">2</span>', body)
        status, r, body = c.request("GET", "/assets/app.css")
        self.assertEqual(status, 200)
        self.assertIn(b"font-family", body)
        self.assertTrue(r.headers.get("ETag"))  # sent by Ferry's static handler, not PHP

    def test_request_as_symfony_sees_it(self):
        c = self.client()
        got = c.json("GET", "/request?a[b]=1&c=2", headers={"X-Test": "yes", "Cookie": "k=v%20w"})
        self.assertEqual(got["method"], "GET")
        self.assertEqual(got["path"], "/request")
        self.assertEqual(got["query"], {"a": {"b": "1"}, "c": "2"})
        self.assertEqual(got["headers"]["x-test"], "yes")
        self.assertEqual(got["cookies"], {"k": "v w"})
        self.assertEqual(got["client_ip"], "127.0.0.1")
        self.assertFalse(got["secure"])
        s = got["server"]
        self.assertEqual(s["REMOTE_ADDR"], "127.0.0.1")
        self.assertEqual(s["SERVER_PROTOCOL"], "HTTP/1.1")
        self.assertEqual(s["SCRIPT_NAME"], "/index.php")
        self.assertIsNone(s["HTTPS"])
        self.assertLess(abs(s["REQUEST_TIME_FLOAT"] - time.time()), 30)
        self.assertTrue(got["uri"].endswith("/request?a%5Bb%5D=1&c=2"), got["uri"])
        # a urlencoded form (parsed by Ferry) and a PUT's urlencoded body (parsed as createFromGlobals does)
        got = c.json("POST", "/request", body="x=1&y[]=2&y[]=3",
                     headers={"Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual(got["form"], {"x": "1", "y": ["2", "3"]})
        got = c.json("PUT", "/request", body="p=q", headers={"Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual(got["form"], {"p": "q"})
        got = c.json("POST", "/request", body='{"j":1}', headers={"Content-Type": "application/json"})
        self.assertEqual(got["content"], '{"j":1}')
        self.assertEqual(got["form"], [])

    def test_a_binary_file_response_is_sent_by_the_server(self):
        with open(os.path.join(self.app, "files", "manual.txt"), "rb") as f:
            data = f.read()
        c = self.client()
        status, r, body = c.request("GET", "/download")
        self.assertEqual(status, 200)
        self.assertEqual(body, data)
        self.assertIn("attachment", r.headers["Content-Disposition"])
        self.assertIsNone(r.headers.get("X-Sendfile"))
        etag = r.headers["ETag"]
        status, r, body = c.request("GET", "/download", headers={"Range": "bytes=10-29"})
        self.assertEqual((status, body), (206, data[10:30]))
        self.assertEqual(r.headers["Content-Range"], f"bytes 10-29/{len(data)}")
        status, r, body = c.request("GET", "/download", headers={"If-None-Match": etag})
        self.assertEqual((status, body), (304, b""))
        # PHP saw the server's X-Sendfile-Type, never a client's
        got = c.json("GET", "/request", headers={"X-Sendfile-Type": "X-Accel-Redirect"})
        self.assertEqual(got["headers"]["x-sendfile-type"], "X-Sendfile")

    def test_each_set_cookie_is_sent(self):
        c = self.client()
        status, r, body = c.request("GET", "/cookie")
        self.assertEqual(status, 200)
        values = r.headers.get_all("Set-Cookie")
        self.assertEqual(len(values), 2, values)
        self.assertIn("a=one; path=/; httponly; samesite=lax", values)
        self.assertTrue(any(v.startswith("b=two%3B%20with%20%3D%20signs;") and "samesite=strict" in v
                            for v in values), values)

    def test_upload_is_an_uploaded_file_that_moves(self):
        data = os.urandom(300_000)
        src = os.path.join(self.tmp.name, "photo.bin")
        with open(src, "wb") as f:
            f.write(data)
        out = self.srv.curl("-F", f"file=@{src};filename=photo one.bin", self.srv.url("/upload"))
        got = json.loads(out.stdout)
        self.assertEqual(got["name"], "photo one.bin")
        self.assertEqual(got["size"], len(data))
        self.assertEqual(got["sha256"], hashlib.sha256(data).hexdigest())
        with open(got["stored"], "rb") as f:  # moved out of Ferry's temp file
            self.assertEqual(f.read(), data)
        self.assertFalse(os.path.exists(got["tmp"]))
        # not moved: Ferry removes the temp file after the response
        out = self.srv.curl("-F", f"file=@{src}", "-F", "keep=0", self.srv.url("/upload"))
        got = json.loads(out.stdout)
        self.assertIsNone(got["stored"])
        self.assertTrue(wait_until(lambda: not os.path.exists(got["tmp"]), 5.0), got["tmp"])

    def test_streamed_response_arrives_as_it_is_printed(self):
        check_streamed_lines(self, self.srv)

    def test_printed_output_goes_before_the_body(self):
        c = self.client()
        status, r, body = c.request("GET", "/echo")
        self.assertEqual(status, 200)
        self.assertEqual(body, b"printed by the controller\nand printf\nthe response body\n")
        self.assertIsNone(r.headers.get("X-Legacy"))  # header() has no effect under the CLI (documented)
        # the protocol is intact: the next request on this connection is answered normally
        self.assertEqual(c.json("GET", "/api/info")["framework"], "symfony")

    def test_a_service_is_reset_between_requests(self):
        c = self.client()
        for i in range(6):  # both workers, several times
            got = c.json("GET", f"/state?set=user{i}")
            self.assertIsNone(got["before"], got)
            self.assertEqual(got["now"], f"user{i}")
            self.assertIsNone(c.json("GET", "/state")["before"])

    def test_errors(self):
        c = self.client()
        status, r, body = c.request("GET", "/boom")
        self.assertEqual(status, 500)
        self.assertIn(b"Internal Server Error", body)  # Symfony's own error page
        self.assertEqual(c.json("GET", "/api/info")["framework"], "symfony")
        status, _, body = self.srv.request("GET", "/exit")
        self.assertEqual(status, 502)
        self.assertTrue(self.srv.wait_for_log("exit", 5.0))
        for _ in range(4):  # the worker was replaced; everyone else is served
            self.assertEqual(self.srv.request("GET", "/api/info")[0], 200)
        status, _, body = self.srv.request("GET", "/fatal")
        self.assertIn(status, (500, 502))
        self.assertTrue(self.srv.wait_for_log("Allowed memory size of 67108864 bytes exhausted", 5.0),
                        self.srv.stderr()[-3000:])
        for _ in range(4):
            self.assertEqual(self.srv.request("GET", "/api/info")[0], 200)

    def test_form_with_csrf_flash_and_sqlite(self):
        c = self.client()
        status, _, page = c.request("GET", "/")
        self.assertEqual(status, 200)
        token = re.search(rb'name="_token" value="([^"]+)"', page).group(1).decode()
        text = f"note {os.getpid()} {time.time()}"
        form = f"_token={token}&text={text.replace(' ', '+')}"
        hdrs = {"Content-Type": "application/x-www-form-urlencoded"}
        status, r, _ = c.request("POST", "/notes", body=form, headers=hdrs)
        self.assertEqual(status, 302)
        self.assertEqual(r.headers["Location"], "/")
        status, _, page = c.request("GET", "/")
        self.assertIn(f"Note &quot;{text}&quot; saved.".encode(), page)  # the flash, once
        self.assertIn(f"<li>{text}</li>".encode(), page)
        status, _, page = c.request("GET", "/")
        self.assertNotIn(b"saved.", page)
        self.assertIn(f"<li>{text}</li>".encode(), page)
        # without the token, or with another session's: refused
        self.assertEqual(c.request("POST", "/notes", body="text=x", headers=hdrs)[0], 419)
        other = self.client()
        self.assertEqual(other.request("POST", "/notes", body=form, headers=hdrs)[0], 419)

    def test_a_failed_transaction_is_rolled_back_before_anything_else(self):
        hdrs = {"Content-Type": "application/x-www-form-urlencoded"}
        for _ in range(4):  # on both workers
            self.assertEqual(self.srv.request("POST", "/notes/fail", body="text=ghost", headers=hdrs)[0], 500)
        for _ in range(6):
            got = self.client().json("GET", "/api/notes")
            self.assertFalse(got["in_transaction"])
            self.assertNotIn("ghost", [n["text"] for n in got["notes"]])
        # right after a failure, the database is free: the failed request's transaction and its lock were not
        # kept until that worker's next request (another process writes within 5 s while nothing else runs)
        import sqlite3
        self.assertEqual(self.srv.request("POST", "/notes/fail", body="text=ghost", headers=hdrs)[0], 500)
        con = sqlite3.connect(os.path.join(self.app, "var", "notes.sqlite"), timeout=5)
        try:
            t0 = time.monotonic()
            con.execute("INSERT INTO notes (text) VALUES ('from outside')")
            con.commit()
            self.assertLess(time.monotonic() - t0, 5)
        finally:
            con.close()
        self.assertIn("from outside", [n["text"] for n in self.client().json("GET", "/api/notes")["notes"]])

    def test_a_replaced_database_file_is_opened_again(self):
        import sqlite3
        c = self.client()
        c.json("GET", "/api/notes")  # the workers hold a connection (on one of them at least)
        db = os.path.join(self.app, "var", "notes.sqlite")
        fresh = db + ".new"
        con = sqlite3.connect(fresh)
        con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT NOT NULL)")
        con.execute("INSERT INTO notes (text) VALUES ('from the new file')")
        con.commit()
        con.close()
        os.replace(fresh, db)
        for _ in range(4):
            got = self.client().json("GET", "/api/notes")
            self.assertEqual([n["text"] for n in got["notes"]], ["from the new file"])

    def test_sessions_are_isolated_under_concurrency(self):
        # 4 users with their own sessions over 2 workers, 25 requests each: each sees only its own data (session
        # values, locale and what the translator says, a shared service's state)
        errors = []

        locales = {0: ("fr", "Bonjour"), 1: ("de", "Hallo"), 2: ("es", "Hola"), 3: (None, None)}

        def user(k):
            c = Client(self.srv)
            locale, hello = locales[k]
            try:
                form = f"name=user{k}" + (f"&locale={locale}" if locale else "")
                got = c.json("POST", "/session", body=form,
                             headers={"Content-Type": "application/x-www-form-urlencoded"})
                sid = got["id"]
                for n in range(2, 26):
                    got = c.json("GET", "/session")
                    # user 3 chose no locale: the default, never the one another user's request set
                    want = {"n": n, "name": f"user{k}", "id": sid, "locale": locale or "en", "hello": hello or "Hello"}
                    if got != want:
                        errors.append((k, n, got))
                        return
                    state = c.json("GET", f"/state?set=user{k}-{n}")
                    if state["before"] is not None:  # another request's value in a shared service
                        errors.append((k, n, state))
                        return
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append((k, repr(e)))
            finally:
                c.close()
        threads = [threading.Thread(target=user, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors, [])
        # a client without the cookie gets a fresh session, not the last one a worker served
        c = self.client()
        got = c.json("GET", "/session")
        self.assertEqual((got["n"], got["name"]), (1, None))


@unittest.skipUnless(HAVE_SYMFONY, "Symfony from Debian (scripts/setup.sh installs php-symfony-*)")
class ForkedWorkers(SymfonyServer):
    POOL = {"fork": True, "max_jobs": 7}

    def test_workers_forked_from_the_booted_kernel(self):
        # http.pool.fork (what the example's .rr.yaml sets): the kernel boots once in the template; each worker
        # (recycled every 7 requests) is forked from it, opens its own SQLite connection and serves sessions
        self.assertTrue(self.srv.wait_for_log("ready: new workers are forked from it", 10.0))
        c = self.client()
        pids = set()
        for n in range(1, 31):
            info = c.json("GET", "/api/info")
            pids.add(info["pid"])
            self.assertLessEqual(info["served"], 7, info)  # counted from the template's 0
            self.assertEqual(c.json("GET", "/api/notes")["in_transaction"], False)
            got = c.json("POST", "/session", {"name": f"forked{n}"})
            self.assertEqual((got["n"], got["name"]), (n, f"forked{n}"))
        self.assertGreater(len(pids), 2, pids)  # recycled workers, forked again
        self.assertNotIn("unexpectedly", self.srv.stderr())


@unittest.skipUnless(HAVE_SYMFONY, "Symfony from Debian (scripts/setup.sh installs php-symfony-*)")
class LeakingApp(unittest.TestCase):
    def test_a_worker_past_max_worker_memory_is_replaced_between_requests(self):
        limit_mb = 96
        with tempfile.TemporaryDirectory(prefix="ferry-symfony-") as tmp:
            app = copy_app(tmp)
            cfg = symfony_config(app)
            cfg["http"]["pool"]["supervisor"] = {"max_worker_memory": limit_mb, "watch_tick": "100ms"}
            with Server(cfg) as srv:
                c = Client(srv)
                answers = []
                try:
                    for _ in range(60):  # 8 MB a request over 2 workers: several generations each
                        answers.append(c.json("GET", "/leak?mb=8"))
                        time.sleep(0.1)  # memory is read every watch_tick: about one request per tick
                finally:
                    c.close()
                pids = {a["pid"] for a in answers}
                self.assertGreaterEqual(len(pids), 4, pids)
                # soft, but bounded: a worker at twice its limit (as last read, once a tick) is stopped after
                # its request; a few requests may come between two reads
                self.assertLess(max(a["rss_kb"] for a in answers), (2 * limit_mb + 32) * 1024)
                log = srv.stderr()
                self.assertRegex(log, rf"worker \d+ uses \d+ MB \(max_worker_memory {limit_mb} MB\): replacing it")
                self.assertNotIn("unexpectedly", log)


@unittest.skipUnless(HAVE_SYMFONY, "Symfony from Debian (scripts/setup.sh installs php-symfony-*)")
class SameFrontControllerElsewhere(unittest.TestCase):
    def test_the_front_controller_runs_without_ferry(self):
        # php's built-in server runs public/index.php per request with Symfony's own runtime (no APP_RUNTIME),
        # as php-fpm would: the file needs no change for Ferry
        with tempfile.TemporaryDirectory(prefix="ferry-symfony-") as tmp:
            app = copy_app(tmp)
            s = socket.socket()
            s.bind((HOST, 0))
            port = s.getsockname()[1]
            s.close()
            env = dict(os.environ, APP_ENV="prod", APP_DEBUG="0")
            env.pop("APP_RUNTIME", None)
            proc = subprocess.Popen(["php", "-S", f"{HOST}:{port}", "-t", f"{app}/public", f"{app}/public/index.php"],
                                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                def answered():
                    try:
                        out = subprocess.run(["curl", "-sS", "--max-time", "10", f"http://{HOST}:{port}/api/info"],
                                             capture_output=True, timeout=15)
                        return out.returncode == 0 and json.loads(out.stdout)["framework"] == "symfony"
                    except (ValueError, subprocess.TimeoutExpired):
                        return False
                self.assertTrue(wait_until(answered, 20.0))
            finally:
                proc.terminate()
                proc.wait(10)


if __name__ == "__main__":
    unittest.main()
