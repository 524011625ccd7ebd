"""http.ssl in operation (issue 45): certificates reloaded by SIGHUP and when a file changes (open connections
keep theirs, sessions still resume, a broken file keeps the current one), config errors naming the key, and
examples/chat in Chromium over https, wss and server-sent events."""

import json
import os
import signal
import socket
import ssl
import subprocess
import tempfile
import unittest

from harness import BIN, HOST, Server, wait_until
from tlscase import https_port, openssl, pki


class Reload(unittest.TestCase):
    def start(self):
        self.dir = tempfile.TemporaryDirectory(prefix="ferry-tls-reload-")
        self.addCleanup(self.dir.cleanup)
        self.cert, self.key = os.path.join(self.dir.name, "s.crt"), os.path.join(self.dir.name, "s.key")
        self.install("server")
        srv = Server({"http": {"ssl": {"address": f"{HOST}:0", "cert": self.cert, "key": self.key}}}).start()
        self.addCleanup(srv.close)
        self.addCleanup(lambda: srv.proc.poll() is None and srv.stop())
        return srv, https_port(srv)

    def install(self, name, cn=None):
        """Puts a certificate in place as a renewal does: written aside, then renamed over the old one."""
        if cn:
            openssl("req", "-x509", "-new", "-key", pki().path("server.key"), "-out", self.cert + ".new", "-days",
                    "2", "-subj", f"/CN={cn}", "-addext", "subjectAltName=IP:127.0.0.1", cwd=pki().dir)
        else:
            with open(pki().path(f"{name}.crt"), "rb") as f, open(self.cert + ".new", "wb") as g:
                g.write(f.read())
        with open(pki().path("server.key"), "rb") as f, open(self.key, "wb") as g:
            g.write(f.read())
        os.replace(self.cert + ".new", self.cert)

    def subject(self, port, sock=None):
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        s = sock or ctx.wrap_socket(socket.create_connection((HOST, port), timeout=5))
        der = s.getpeercert(binary_form=True)
        p = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-subject"], input=der,
                           capture_output=True)
        if sock is None:
            s.close()
        return p.stdout.decode().strip()

    def test_sighup_and_a_changed_file_load_the_new_certificate_open_connections_keep_theirs(self):
        srv, port = self.start()
        self.assertIn("CN = 127.0.0.1", self.subject(port))
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        kept = ctx.wrap_socket(socket.create_connection((HOST, port), timeout=5))
        self.addCleanup(kept.close)
        kept.sendall(b"GET /big?n=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertIn(b"x", kept.recv(65536))  # the TLS 1.3 ticket came with it
        session = kept.session
        self.install(None, cn="renewed-by-sighup")
        os.kill(srv.proc.pid, signal.SIGHUP)
        self.assertTrue(srv.wait_for_log("SIGHUP: certificate reloaded"))
        self.assertIn("renewed-by-sighup", self.subject(port))
        # The ticket keys are the server's, not the certificate's: a session from before the reload resumes.
        resumed = ctx.wrap_socket(socket.create_connection((HOST, port), timeout=5), session=session)
        self.addCleanup(resumed.close)
        self.assertTrue(resumed.session_reused)
        # The connection opened before still works, with its certificate.
        kept.sendall(b"GET /big?n=3 HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertIn(b"xxx", kept.recv(65536))
        self.assertIn("CN = 127.0.0.1", self.subject(port, kept))
        # A renewal without a signal: the file changes, the server sees it within a few seconds.
        self.install(None, cn="renewed-on-disk")
        self.assertTrue(wait_until(lambda: "renewed-on-disk" in self.subject(port), 10), srv.stderr())
        self.assertTrue(srv.wait_for_log("a certificate file changed: certificate reloaded"))
        # A broken file: logged, the current certificate stays.
        with open(self.cert, "w") as f:
            f.write("not a certificate\n")
        self.assertTrue(srv.wait_for_log("the certificate was not reloaded, the current one stays", 10))
        self.assertIn("renewed-on-disk", self.subject(port))


class ChatInTheBrowser(unittest.TestCase):
    """examples/chat served over HTTPS: Chromium loads the page, signs two users in, chats over wss:// and reads
    the feed (server-sent events) over TLS (tests/e2e/node/chat_browser.js)."""

    def test_two_users_chat_over_https_and_wss(self):
        from test_chat import browser_missing, chat_server
        from wsclient import NODE_DIR
        missing = browser_missing()
        if missing:
            self.fail(missing)
        srv = chat_server(["-o", f"http.ssl.address={HOST}:0", "-o", f"http.ssl.cert={pki().path('server.crt')}",
                           "-o", f"http.ssl.key={pki().path('server.key')}"])
        self.addCleanup(srv.close)
        self.addCleanup(lambda: srv.proc.poll() is None and srv.stop())
        port = https_port(srv)
        p = subprocess.run(["node", "chat_browser.js", f"https://127.0.0.1:{port}"], cwd=NODE_DIR,
                           capture_output=True, text=True, timeout=90)
        lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
        self.assertTrue(lines, p.stderr)
        result = json.loads(lines[-1])
        self.assertEqual(result["result"], "ok", json.dumps(result, indent=1) + "\n" + srv.stderr()[-3000:])
        d = result["detail"]
        self.assertTrue(d["secure"], "the page is a secure context served over https")
        self.assertIn("/ h2", d["protocols"], "the page came over HTTP/2 (ALPN)")
        self.assertIn("alice: hello from alice", d["bob"]["messages"])
        self.assertIn("bob joined", d["alice"]["feed"])


class Errors(unittest.TestCase):
    def test_unreadable_or_mismatched_files_name_the_key(self):
        cases = [
            ({"cert": "/nonexistent/s.crt", "key": pki().path("server.key")},
             "http.ssl.cert: cannot use /nonexistent/s.crt"),
            ({"cert": pki().path("server.crt"), "key": pki().path("alice.key")},
             "http.ssl.key: " + pki().path("alice.key") + " is not the key of"),
            ({"cert": pki().path("server.crt"), "key": pki().path("server.key"),
              "client_auth_type": "require_and_verify_client_cert"},
             "http.ssl.root_ca: required by client_auth_type"),
        ]
        for section, message in cases:
            srv = Server({"http": {"ssl": dict({"address": f"{HOST}:0"}, **section)}})
            self.addCleanup(srv.close)
            p = subprocess.run([BIN, "serve", "-c", srv.config_path], capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(message, p.stderr)
            self.assertNotIn("listening", p.stdout)


if __name__ == "__main__":
    unittest.main()
