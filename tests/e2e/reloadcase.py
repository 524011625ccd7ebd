"""The reload tests' base (test_reload.py, test_reset.py): each test runs its own server on an app directory of
its own, tests/php/versioned.php answering with the version its files say."""

import os
import re
import tempfile

from harness import ServerTestCase


class ReloadCase(ServerTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = None  # every test starts its own server, on its own app directory

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.TemporaryDirectory(prefix="ferry-reload-")
        self.addCleanup(self.tmp.cleanup)
        self.app = os.path.join(self.tmp.name, "app")
        os.makedirs(self.app)
        self.write("version.php", "<?php return 'v1';\n")

    def write(self, name, text, rename=False):
        path = os.path.join(self.app, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if rename:  # as vim and JetBrains save: a new file renamed over the old one
            tmp = path + ".tmp~"
            with open(tmp, "w") as f:
                f.write(text)
            os.rename(tmp, path)
        else:
            with open(path, "w") as f:
                f.write(text)

    def serve(self, reload=None, pool=None, rpc=None, extra=None, reload_as_is=False, http=None):
        cfg = {"http": dict({"pool": dict({"num_workers": 2}, **(pool or {}))}, **(http or {}))}
        if reload_as_is:
            cfg["reload"] = reload
        elif reload is not False:
            cfg["reload"] = dict({"dirs": [self.app], "interval": "100ms"}, **(reload or {}))
        if rpc:
            cfg["rpc"] = rpc
        cfg.update(extra or {})
        return self.start_server(cfg, script="versioned.php", env={"FERRY_TEST_APP": self.app})

    def version(self, srv, path="/"):
        status, _, body = srv.request("GET", path)
        self.assertEqual(status, 200, body)
        return body.decode().split(" ")[0]

    def resets(self, srv):
        return srv.stderr().count("resetting the workers")

    def reset_lines(self, srv):
        """What each reset of the watcher said changed, in order, paths relative to the app ("1 file(s)
        changed: a.php")."""
        lines = re.findall(r"reload: (.*): resetting the workers", srv.stderr())
        for prefix in {os.path.realpath(self.app) + "/", self.app + "/"}:
            lines = [line.replace(prefix, "") for line in lines]
        return lines
