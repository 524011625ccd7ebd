"""Installed like a server: `cmake --install` into a prefix, the Debian package of scripts/package.sh unpacked
with `dpkg -x` into a temporary root, and php-worker/composer.json required by an app through Composer. The
installed binary serves the installed example, and gives an app of its own the installed PHP library
(FERRY_PHP_WORKER). Nothing is installed on the machine itself."""

import glob
import json
import os
import shutil
import signal
import subprocess
import tempfile
import unittest
import urllib.request

from harness import BIN, HOST, ROOT, read_listening_line

BUILD = os.path.dirname(os.path.realpath(BIN))  # the build directory the tests run from

# An app of the user's own: it loads Ferry's library from wherever ferry says it is, and tells where it came from.
OWN_WORKER = """<?php
require getenv('FERRY_PHP_WORKER') . '/autoload.php';
$worker = Ferry\\Worker\\Worker::create();
while ($req = $worker->waitRequest()) {
    $worker->respond(200, ['Content-Type' => 'application/json'], json_encode([
        'library' => (new ReflectionClass(Ferry\\Worker\\Worker::class))->getFileName(),
        'env' => getenv('FERRY_PHP_WORKER'),
    ]));
}
"""
OWN_CONFIG = 'version: "3"\nserver:\n  command: "php worker.php"\nhttp:\n  address: 127.0.0.1:0\n' \
             '  pool:\n    num_workers: 1\n'


def get(port, path):
    with urllib.request.urlopen(f"http://{HOST}:{port}{path}", timeout=10) as r:
        return r.status, r.read().decode()


class Served:
    """`ferry serve -w DIR` of an installed binary, its environment without FERRY_PHP_WORKER (ferry finds it)."""

    def __init__(self, binary, workdir, tmp):
        env = {k: v for k, v in os.environ.items() if k != "FERRY_PHP_WORKER"}
        env.update(FERRY_ADDRESS=f"{HOST}:0", FERRY_RPC=f"unix://{tmp}/rpc-{os.getpid()}.sock")
        self.err = open(os.path.join(tmp, "stderr.log"), "w+b")
        self.proc = subprocess.Popen([binary, "serve", "-w", workdir], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=self.err, env=env)
        line, _ = read_listening_line(self.proc, 20)
        if line is None:
            self.stop()
            text = self.stderr()
            self.close()
            raise AssertionError(f"{binary} did not listen; stderr:\n{text}")
        self.port = int(line.rsplit(":", 1)[1])

    def stderr(self):
        self.err.seek(0)
        return self.err.read().decode("utf-8", "replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(20)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(20)
        self.proc.stdout.close()
        self.err.close()


class InstalledCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ferry-e2e-install-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def serve(self, binary, workdir):
        srv = Served(binary, workdir, self.tmp)
        self.addCleanup(srv.close)
        return srv

    def check_tree(self, prefix):
        """What an installation holds under `prefix` (/usr for the package)."""
        self.assertTrue(os.access(os.path.join(prefix, "bin", "ferry"), os.X_OK))
        lib = os.path.join(prefix, "share", "ferry", "php-worker")
        for f in ("autoload.php", "composer.json", "src/Worker.php", "src/Runtime/Runtime.php",
                  "src/Laravel/Runner.php"):
            self.assertTrue(os.path.isfile(os.path.join(lib, f)), f)
        self.assertTrue(os.access(os.path.join(lib, "bin", "ferry-laravel"), os.X_OK))
        self.assertFalse(os.path.exists(os.path.join(lib, "tests")))  # the library, not its tests
        self.assertFalse(os.path.exists(os.path.join(lib, "phpunit.xml")))
        doc = os.path.join(prefix, "share", "doc", "ferry")
        for f in ("README.md", "LICENSE", "copyright", "docs/configuration.md", "docs/deployment.md",
                  "examples/hello/.rr.yaml", "examples/hello/worker.php", "examples/hello/public/style.css",
                  "examples/chat/worker.php", "examples/symfony/.rr.yaml", "examples/laravel/.rr.yaml"):
            self.assertTrue(os.path.isfile(os.path.join(doc, f)), f)
        # what running the examples leaves in the repository is not installed
        self.assertEqual(glob.glob(os.path.join(doc, "examples", "*", "var")), [])
        self.assertEqual(glob.glob(os.path.join(doc, "examples", "**", ".ferry.sock"), recursive=True), [])
        with open(os.path.join(prefix, "lib", "systemd", "system", "ferry.service")) as f:
            unit = f.read()
        for line in ("User=ferry", "ExecStart=/usr/bin/ferry serve -w ${FERRY_APP} -c ${FERRY_CONFIG}",
                     "ExecReload=/bin/kill -HUP $MAINPID", "LimitNOFILE=65536", "AmbientCapabilities=CAP_SYS_NICE",
                     "EnvironmentFile=-/etc/default/ferry", "WantedBy=multi-user.target"):
            self.assertIn(line + "\n", unit)
        return lib, doc

    def check_serves(self, prefix, lib, doc):
        """The installed binary serves the installed example, and an app of the user's own with the installed
        library."""
        binary = os.path.join(prefix, "bin", "ferry")
        out = subprocess.run([binary, "version"], capture_output=True, text=True, timeout=10)
        self.assertRegex(out.stdout, r"^ferry \d+\.\d+\.\d+")
        hello = self.serve(binary, os.path.join(doc, "examples", "hello"))
        status, body = get(hello.port, "/?name=installed")
        self.assertEqual(status, 200)
        self.assertIn("Hello, installed!", body)
        status, css = get(hello.port, "/style.css")  # the example's static files, from its installed copy
        self.assertEqual(status, 200)
        with open(os.path.join(doc, "examples", "hello", "public", "style.css")) as f:
            self.assertEqual(css, f.read())
        self.assertEqual(hello.stop(), 0, hello.stderr())

        app = os.path.join(self.tmp, "app")
        os.makedirs(app)
        with open(os.path.join(app, "worker.php"), "w") as f:
            f.write(OWN_WORKER)
        with open(os.path.join(app, ".rr.yaml"), "w") as f:
            f.write(OWN_CONFIG)
        own = self.serve(binary, app)
        status, body = get(own.port, "/")
        self.assertEqual(status, 200, own.stderr())
        seen = json.loads(body)
        self.assertEqual(seen["env"], lib)
        self.assertEqual(seen["library"], os.path.join(lib, "src", "Worker.php"))
        self.assertEqual(own.stop(), 0, own.stderr())


class CMakeInstall(InstalledCase):
    def test_cmake_install_into_a_prefix(self):
        prefix = os.path.join(self.tmp, "prefix")
        r = subprocess.run(["cmake", "--install", BUILD, "--prefix", prefix], capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        lib, doc = self.check_tree(prefix)
        self.check_serves(prefix, lib, doc)


class DebianPackage(InstalledCase):
    def test_the_package_unpacked_into_a_root(self):
        r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "package.sh"), "--build-dir", BUILD],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        deb = r.stdout.strip().splitlines()[-1]
        arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip()
        self.assertRegex(os.path.basename(deb), rf"^ferry_\d+\.\d+\.\d+_{arch}\.deb$")
        fields = subprocess.run(["dpkg-deb", "--field", deb], capture_output=True, text=True, check=True).stdout
        self.assertIn("Package: ferry\n", fields)
        depends = next(l for l in fields.splitlines() if l.startswith("Depends: "))
        for dep in ("php8.2-cli | php-cli", "adduser", "media-types", "libyaml-cpp0.7", "libssl3", "libc6"):
            self.assertIn(dep, depends)
        control = os.path.join(self.tmp, "control")
        subprocess.run(["dpkg-deb", "-e", deb, control], check=True)
        with open(os.path.join(control, "postinst")) as f:
            postinst = f.read()
        self.assertIn("adduser --system --group", postinst)  # the user ferry.service runs as
        self.assertTrue(os.access(os.path.join(control, "postinst"), os.X_OK))
        root = os.path.join(self.tmp, "root")
        subprocess.run(["dpkg", "-x", deb, root], check=True)
        prefix = os.path.join(root, "usr")
        lib, doc = self.check_tree(prefix)
        self.check_serves(prefix, lib, doc)
        # stripped: a server binary, not a debug build
        info = subprocess.run(["file", "-b", os.path.join(prefix, "bin", "ferry")], capture_output=True,
                              text=True).stdout if shutil.which("file") else "stripped"
        self.assertNotIn("not stripped", info)


class ComposerPackage(InstalledCase):
    def test_an_app_requires_the_php_library_with_composer(self):
        # As an app requires RoadRunner's spiral/roadrunner-worker: here from a path repository, offline.
        self.assertTrue(shutil.which("composer"), "composer is installed by scripts/setup.sh")
        env = dict(os.environ, COMPOSER_ALLOW_SUPERUSER="1", COMPOSER_HOME=os.path.join(self.tmp, "home"),
                   COMPOSER_NO_INTERACTION="1", COMPOSER_DISABLE_NETWORK="1")
        lib = os.path.join(ROOT, "php-worker")
        r = subprocess.run(["composer", "validate", "--strict", "--no-check-lock"], cwd=lib, env=env,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        app = os.path.join(self.tmp, "app")
        os.makedirs(app)
        with open(os.path.join(app, "composer.json"), "w") as f:
            json.dump({"name": "example/app", "require": {"ferry/worker": "*@dev"},
                       "repositories": [{"type": "path", "url": lib, "options": {"symlink": False}},
                                        {"packagist.org": False}]}, f)
        r = subprocess.run(["composer", "install", "--no-dev", "--no-progress"], cwd=app, env=env,
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(os.path.isfile(os.path.join(app, "vendor", "ferry", "worker", "src", "Worker.php")))
        self.assertTrue(os.path.exists(os.path.join(app, "vendor", "bin", "ferry-laravel")))
        with open(os.path.join(app, "worker.php"), "w") as f:
            f.write(OWN_WORKER.replace("getenv('FERRY_PHP_WORKER') . '/autoload.php'",
                                       "__DIR__ . '/vendor/autoload.php'"))
        with open(os.path.join(app, ".rr.yaml"), "w") as f:
            f.write(OWN_CONFIG)
        srv = self.serve(BIN, app)
        status, body = get(srv.port, "/")
        self.assertEqual(status, 200, srv.stderr())
        self.assertEqual(json.loads(body)["library"],
                         os.path.join(os.path.realpath(app), "vendor", "ferry", "worker", "src", "Worker.php"))
        self.assertEqual(srv.stop(), 0, srv.stderr())


if __name__ == "__main__":
    unittest.main()
