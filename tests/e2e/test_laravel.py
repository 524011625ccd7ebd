"""Laravel 8 from Debian's php-laravel-framework on Ferry (issue 42): examples/laravel served by
php-worker/bin/ferry-laravel, booted once per worker, each request in a sandbox of the booted application (as
Laravel Octane does); Blade, CSRF forms, sessions, encrypted cookies, uploads, streamed responses, printed
output, errors, SQLite, and nothing of one request or one user reaching the next."""

import hashlib
import json
import os
import re
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time
import unittest

from frameworks import AppServer, Client, check_streamed_lines, copy_example
from harness import HOST, ROOT, Server, wait_until

RUNNER = os.path.join(ROOT, "php-worker", "bin", "ferry-laravel")
HAVE_LARAVEL = os.path.isfile("/usr/share/php/Illuminate/autoload.php") and \
    subprocess.run(["php", "-r", "exit(extension_loaded('pdo_sqlite') ? 0 : 1);"]).returncode == 0


def copy_app(dest):
    """The example as a project of its own (storage/ and the database in the test's directory)."""
    return copy_example("laravel", dest, ignore=("storage", "database.sqlite"))


def laravel_config(app, workers=2):
    return {
        "server": {
            "command": f"php {RUNNER}",
            "env": {
                "APP_BASE_PATH": app,
                "APP_ENV": "production",
                "APP_DEBUG": "false",
            },
        },
        "http": {
            "middleware": ["static", "sendfile"],
            "static": {"dir": f"{app}/public", "forbid": [".php"]},
            "pool": {"num_workers": workers},
        },
    }


def check_isolation(test):
    """4 users with their own sessions, logins and locales over 2 workers, 25 requests each: each sees only
    its own data; returns {session id: user id}."""
    locales = ["fr", "de", "en", "fr"]
    hello = {"fr": "Bonjour", "de": "Hallo", "en": "Hello"}
    errors = []
    sessions = {}

    def user(k):
        c = Client(test.srv)
        name = f"user{k}-{os.getpid()}-{test.__class__.__name__}"
        try:
            uid = c.json("POST", "/login", {"name": name, "locale": locales[k]})["id"]
            got = c.json("POST", "/session", {"name": name})
            sid = got["id"]
            sessions[sid] = uid
            for n in range(2, 26):
                if n % 5 == 0:  # between its own requests, this user sets state that must not leak
                    c.json("GET", f"/state?set={name}")
                got = c.json("GET", "/session")
                want = {"n": n, "name": name, "id": sid, "user": name, "locale": locales[k],
                        "hello": hello[locales[k]], "scratch_before": None}
                if got != want:
                    errors.append((k, n, got))
                    return
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append((k, repr(e)))
        finally:
            c.close()
    threads = [threading.Thread(target=user, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    test.assertEqual(errors, [])
    test.assertEqual(len(sessions), 4)
    # a client without a cookie: a fresh session, nobody logged in, the config's locale
    got = test.client().json("GET", "/session")
    test.assertEqual((got["n"], got["name"], got["user"], got["locale"]), (1, None, None, "en"))
    return sessions


class LaravelServer(AppServer):
    PREFIX = "ferry-laravel-"

    @classmethod
    def copy_app(cls, dest):
        return copy_app(dest)

    @classmethod
    def config(cls, app):
        return laravel_config(app)


@unittest.skipUnless(HAVE_LARAVEL, "Laravel from Debian (scripts/setup.sh installs php-laravel-framework, php-sqlite3)")
class LaravelTest(LaravelServer):
    def test_application_boots_once_per_worker(self):
        c = self.client()
        seen = {}
        for _ in range(12):
            info = c.json("GET", "/api/info")
            self.assertEqual(info["framework"], "laravel")
            self.assertTrue(info["version"].startswith("8."), info)
            self.assertEqual(info["boots"], 1, info)  # bootstrap/app.php's providers booted once in this process
            seen.setdefault(info["pid"], []).append(info["served"])
        self.assertLessEqual(len(seen), 2, seen)
        self.assertTrue(any(max(v) >= 6 for v in seen.values()), seen)
        for counts in seen.values():
            self.assertEqual(counts, sorted(counts))

    def test_blade_page_and_a_static_asset(self):
        c = self.client()
        status, r, body = c.request("GET", "/")
        self.assertEqual(status, 200, body[:500])
        self.assertIn(b"<h1>Laravel 8.", body)
        self.assertIn(b'<span id="visits">1</span>', body)
        self.assertIn("laravel_session", c.cookies)
        status, r, body = c.request("GET", "/")
        self.assertIn(b'<span id="visits">2</span>', body)
        status, r, body = c.request("GET", "/assets/app.css")
        self.assertEqual(status, 200)
        self.assertIn(b"font-family", body)
        self.assertTrue(r.headers.get("ETag"))  # sent by Ferry's static handler, not PHP

    def test_csrf_form_flash_message_and_the_sqlite_list(self):
        c = self.client()
        status, r, page = c.request("GET", "/")
        self.assertEqual(status, 200)
        token = re.search(rb'name="_token" value="([^"]+)"', page).group(1).decode()
        note = f"note {os.getpid()} {time.time()}"
        home = f"http://{self.srv.address}/"
        status, r, body = c.request("POST", "/notes", {"_token": token, "body": note}, {"Referer": home})
        self.assertEqual(status, 302, body[:500])
        self.assertEqual(r.headers["Location"], home)
        status, r, page = c.request("GET", "/")
        self.assertIn(f'<p id="flash">Note added: {note}</p>'.encode(), page)
        self.assertIn(f"<li>{note}</li>".encode(), page)
        status, r, page = c.request("GET", "/")  # the flash is shown once; the note stays
        self.assertNotIn(b'id="flash"', page)
        self.assertIn(f"<li>{note}</li>".encode(), page)
        # without the token (or with another session's): 419, nothing stored
        status, r, body = c.request("POST", "/notes", {"body": "forged"}, {"Referer": home})
        self.assertEqual(status, 419)
        other = self.client()
        status, r, body = other.request("POST", "/notes", {"_token": token, "body": "forged"}, {"Referer": home})
        self.assertEqual(status, 419)
        self.assertNotIn("forged", c.json("GET", "/api/notes")["notes"])
        # a validation error comes back through the session as $errors
        status, r, body = c.request("POST", "/notes", {"_token": token, "body": ""}, {"Referer": home})
        self.assertEqual(status, 302)
        status, r, page = c.request("GET", "/")
        self.assertIn(b'<p id="error">The body field is required.</p>', page)

    def test_upload_size_and_sha256(self):
        data = os.urandom(300_000)
        src = os.path.join(self.tmp.name, "photo.bin")
        with open(src, "wb") as f:
            f.write(data)
        out = self.srv.curl("-F", f"file=@{src};filename=photo one.bin", self.srv.url("/upload"))
        got = json.loads(out.stdout)
        self.assertEqual(got["name"], "photo one.bin")
        self.assertEqual(got["size"], len(data))
        self.assertEqual(got["sha256"], hashlib.sha256(data).hexdigest())
        self.assertTrue(got["stored"].startswith(os.path.join(self.app, "storage", "app", "uploads")), got)
        with open(got["stored"], "rb") as f:
            self.assertEqual(f.read(), data)

    def test_file_download(self):
        status, r, body = self.client().request("GET", "/download")
        self.assertEqual(status, 200)
        with open(os.path.join(self.app, "public", "assets", "app.css"), "rb") as f:
            self.assertEqual(body, f.read())
        self.assertEqual(r.headers["Content-Disposition"], 'attachment; filename=style.css')
        self.assertIsNone(r.headers.get("X-Sendfile"))  # sent by the server from the file (sendfile middleware)
        status, r, part = self.client().request("GET", "/download", headers={"Range": "bytes=0-9"})
        self.assertEqual((status, part), (206, body[:10]))

    def test_memory_does_not_grow_with_requests(self):
        c = self.client()
        c.json("POST", "/login", {"name": "memory", "locale": "fr"})
        for _ in range(60):  # warm both workers (opcache, compiled views, first allocations)
            c.json("GET", "/session")
        first = {}
        for _ in range(10):
            info = c.json("GET", "/api/info?gc=1")
            first.setdefault(info["pid"], info["memory"])
        for _ in range(300):
            c.json("GET", "/session")
        last = {}
        for _ in range(10):
            info = c.json("GET", "/api/info?gc=1")
            last[info["pid"]] = info["memory"]
        for pid, m in first.items():  # no sandbox, session or user kept per request (300 would show)
            if pid in last:
                self.assertLess(last[pid] - m, 256 * 1024, (first, last))

    def test_streamed_response_arrives_as_it_is_printed(self):
        check_streamed_lines(self, self.srv)

    def test_encrypted_cookies_round_trip(self):
        c = self.client()
        status, r, body = c.request("GET", "/cookie?set=mint")
        self.assertEqual(status, 200)
        sent = [v for v in r.headers.get_all("Set-Cookie") if v.startswith("flavour=")]
        self.assertEqual(len(sent), 1, r.headers.get_all("Set-Cookie"))
        self.assertNotIn("mint", sent[0])  # encrypted by EncryptCookies
        c.cookies["plain"] = "in%20clear"  # in EncryptCookies::$except
        got = c.json("GET", "/cookie")
        self.assertEqual(got, {"flavour": "mint", "plain": "in clear"})
        # a cookie the app did not encrypt is not believed; another client has none
        forged = Client(self.srv)
        self.addCleanup(forged.close)
        forged.cookies["flavour"] = "mint"
        self.assertIsNone(forged.json("GET", "/cookie")["flavour"])
        # the queued cookie does not reach the next response of the worker
        for _ in range(4):
            status, r, body = self.client().request("GET", "/cookie")
            self.assertFalse([v for v in r.headers.get_all("Set-Cookie") or [] if v.startswith("flavour=")])

    def test_json_and_form_bodies_are_the_requests_input(self):
        c = self.client()
        body = json.dumps({"name": "json-user", "a": {"b": 2}})
        status, r, data = c.request("POST", "/api/input", body, {"Content-Type": "application/json"})
        self.assertEqual(status, 200, data[:300])
        self.assertEqual(json.loads(data), {"all": {"name": "json-user", "a": {"b": 2}}, "name": "json-user", "b": 2})
        got = c.json("POST", "/api/input", {"name": "form-user", "a[b]": "3"})
        self.assertEqual((got["name"], got["b"]), ("form-user", "3"))

    def test_printed_output_goes_before_the_body(self):
        c = self.client()
        status, r, body = c.request("GET", "/echo")
        self.assertEqual(status, 200)
        self.assertEqual(body, b"printed by the controller\nand printf\nthe response body\n")
        self.assertEqual(c.json("GET", "/api/info")["framework"], "laravel")  # the protocol is intact

    def test_state_set_by_a_request_does_not_reach_the_next(self):
        c = self.client()
        defaults = {"scratch": None, "instance": None, "config": "Ferry Laravel example", "locale": "en",
                    "shared": None, "controller": None}
        for i in range(6):  # both workers, several times
            got = c.json("GET", f"/state?set=user{i}")
            self.assertEqual(got["before"], defaults, got)
            self.assertEqual(got["now"], f"user{i}")
            self.assertEqual(c.json("GET", "/state")["before"], defaults)

    def test_exception_is_laravels_500_page(self):
        c = self.client()
        status, r, body = c.request("GET", "/boom")
        self.assertEqual(status, 500)
        self.assertIn(b"Server Error", body)  # resources of Illuminate/Foundation/Exceptions/views/500
        self.assertNotIn(b"boom from the controller", body)  # APP_DEBUG=false
        self.assertTrue(self.srv.wait_for_log("boom from the controller", 5.0))  # reported to the log
        self.assertEqual(c.json("GET", "/api/info")["framework"], "laravel")

    def test_exit_answers_502_and_the_worker_is_replaced(self):
        before = set(self.srv.workers())
        status, _, body = self.srv.request("GET", "/exit")
        self.assertEqual(status, 502)
        self.assertTrue(self.srv.wait_for_log("exit", 5.0))
        for _ in range(6):  # the worker was replaced; everyone else is served
            self.assertEqual(self.srv.request("GET", "/api/info")[0], 200)
        self.assertTrue(wait_until(lambda: len(set(self.srv.workers()) - before) >= 1, 10.0))

    def test_fatal_error_answers_that_client_alone_and_the_worker_is_replaced(self):
        before = set(self.srv.workers())
        status, _, body = self.srv.request("GET", "/fatal")
        self.assertIn(status, (500, 502))
        self.assertTrue(self.srv.wait_for_log("Cannot redeclare", 5.0))  # the PHP message, in the log
        for _ in range(6):
            self.assertEqual(self.srv.request("GET", "/api/info")[0], 200)
        self.assertTrue(wait_until(lambda: len(set(self.srv.workers()) - before) >= 1, 10.0))

    def test_transaction_left_open_by_a_failing_request_is_rolled_back(self):
        c = self.client()
        tag = f"t{time.time()}"
        status, r, body = c.request("GET", f"/tx?fail=1&tag={tag}")
        self.assertEqual(status, 500)
        self.assertTrue(self.srv.wait_for_log("rolling back 1 transaction level(s) left open on connection 'sqlite'", 5.0))
        for _ in range(6):  # either worker: nothing of it was committed, no transaction is open, writes go on
            got = c.json("GET", "/api/notes")
            self.assertEqual(got["level"], 0)
            self.assertNotIn(f"tx {tag}", got["notes"])
            self.assertEqual(c.json("GET", f"/tx?tag={tag}-ok")["level_before"], 0)
        self.assertIn(f"tx {tag}-ok", c.json("GET", "/api/notes")["notes"])

    def test_users_are_isolated_under_concurrency(self):
        check_isolation(self)


@unittest.skipUnless(HAVE_LARAVEL, "Laravel from Debian (scripts/setup.sh installs php-laravel-framework, php-sqlite3)")
class DatabaseSessions(LaravelServer):
    ENV = {"SESSION_DRIVER": "database"}

    def test_users_are_isolated_with_the_database_session_driver(self):
        sessions = check_isolation(self)
        # each session row was written for its own user (the handler resolves the user through the request's
        # sandbox), and no session file was written
        conn = sqlite3.connect(os.path.join(self.app, "database", "database.sqlite"))
        try:
            rows = dict(conn.execute("SELECT id, user_id FROM sessions").fetchall())
        finally:
            conn.close()
        for sid, uid in sessions.items():
            self.assertEqual(rows.get(sid), uid, (sid, rows))
        self.assertEqual(os.listdir(os.path.join(self.app, "storage", "framework", "sessions")), [])


@unittest.skipUnless(HAVE_LARAVEL, "Laravel from Debian (scripts/setup.sh installs php-laravel-framework, php-sqlite3)")
class ForkedWorkers(LaravelServer):
    POOL = {"fork": True, "max_jobs": 7}

    def test_workers_forked_from_the_booted_application(self):
        # http.pool.fork: bootstrap/app.php boots once in the template; each worker (recycled every 7
        # requests) is forked from it, opens its own database connection and serves sessions as usual
        self.assertTrue(self.srv.wait_for_log("ready: new workers are forked from it", 10.0))
        c = self.client()
        pids = set()
        for n in range(1, 31):
            info = c.json("GET", "/api/info")
            self.assertEqual(info["boots"], 1, info)
            pids.add(info["pid"])
            self.assertLessEqual(info["served"], 7, info)  # counted from the template's 0
            tag = f"fork{n}"
            self.assertEqual(c.json("GET", f"/tx?tag={tag}")["level_before"], 0)
            self.assertIn(f"tx {tag}", c.json("GET", "/api/notes")["notes"])
            got = c.json("GET", "/session")
            self.assertEqual(got["n"], n)
        self.assertGreater(len(pids), 2, pids)  # recycled workers, forked again


@unittest.skipUnless(HAVE_LARAVEL, "Laravel from Debian (scripts/setup.sh installs php-laravel-framework, php-sqlite3)")
class SqliteFileReplaced(LaravelServer):
    def test_the_next_request_uses_the_new_file(self):
        c = self.client()
        c.json("GET", "/tx?tag=old")
        for _ in range(4):  # both workers connected to the first file
            self.assertIn("tx old", c.json("GET", "/api/notes")["notes"])
        db = os.path.join(self.app, "database", "database.sqlite")
        new = db + ".new"
        conn = sqlite3.connect(new)
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL, created_at TEXT)")
        conn.execute("INSERT INTO notes (body) VALUES ('from the new file')")
        conn.commit()
        conn.close()
        os.replace(new, db)
        for _ in range(6):
            self.assertEqual(c.json("GET", "/api/notes")["notes"], ["from the new file"])
        self.assertTrue(self.srv.wait_for_log("SQLite file of connection 'sqlite' was replaced", 5.0))
        c.json("GET", "/tx?tag=new")  # and writes go to it
        conn = sqlite3.connect(db)
        self.assertIn(("tx new",), conn.execute("SELECT body FROM notes").fetchall())
        conn.close()


@unittest.skipUnless(HAVE_LARAVEL, "Laravel from Debian (scripts/setup.sh installs php-laravel-framework, php-sqlite3)")
class BrokenApp(unittest.TestCase):
    def test_an_app_that_does_not_boot_fails_at_the_start_with_its_error(self):
        with tempfile.TemporaryDirectory(prefix="ferry-laravel-") as tmp:
            app = copy_app(tmp)
            provider = os.path.join(app, "app", "Providers", "AppServiceProvider.php")
            with open(provider) as f:
                code = f.read()
            with open(provider, "w") as f:
                f.write(code.replace("++self::$boots;", "throw new \\RuntimeException('broken at boot');"))
            srv = Server(laravel_config(app))
            try:
                with self.assertRaises(AssertionError):  # no listening line: the pool cannot start
                    srv.start(timeout=6)
                log = srv.stderr()
                self.assertIn("ferry-laravel: the application did not boot: RuntimeException: broken at boot", log)
                self.assertIn("exited with code 2", log)
            finally:
                srv.close()


@unittest.skipUnless(HAVE_LARAVEL, "Laravel from Debian (scripts/setup.sh installs php-laravel-framework, php-sqlite3)")
class SameAppElsewhere(unittest.TestCase):
    def test_the_app_runs_unchanged_under_php_s(self):
        # public/index.php, Laravel's own front controller, per request as php-fpm would run it
        with tempfile.TemporaryDirectory(prefix="ferry-laravel-") as tmp:
            app = copy_app(tmp)
            s = socket.socket()
            s.bind((HOST, 0))
            port = s.getsockname()[1]
            s.close()
            proc = subprocess.Popen(["php", "-S", f"{HOST}:{port}", "-t", f"{app}/public", f"{app}/public/index.php"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                def answered():
                    try:
                        out = subprocess.run(["curl", "-sS", "--max-time", "10", f"http://{HOST}:{port}/api/info"],
                                             capture_output=True, timeout=15)
                        return out.returncode == 0 and json.loads(out.stdout)["framework"] == "laravel"
                    except (ValueError, subprocess.TimeoutExpired):
                        return False
                self.assertTrue(wait_until(answered, 20.0))
            finally:
                proc.terminate()
                proc.wait(10)


if __name__ == "__main__":
    unittest.main()
