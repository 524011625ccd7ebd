"""Runs one end-to-end module for ctest (e2e.<module>): unittest, verbose, then every skipped test with its reason.

A skip is a test that did not run: with FERRY_STRICT_SKIPS=1 (scripts/test.sh sets it) a skip fails the module
unless its reason matches FERRY_ALLOWED_SKIPS, a regular expression naming what this machine or this pass
cannot run (scripts/test.sh builds it: RSS under a sanitizer, a CPU count). FERRY_SKIP_LOG, when set, is a file
each skip is appended to, so the test command can list them all at the end of a pass.

Usage: run.py test_module"""

import os
import re
import sys
import unittest


def main(module):
    suite = unittest.defaultTestLoader.loadTestsFromName(module)
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    allowed = os.environ.get("FERRY_ALLOWED_SKIPS", "")
    strict = os.environ.get("FERRY_STRICT_SKIPS") == "1"
    unexpected = []
    lines = []
    for test, reason in result.skipped:
        ok = bool(allowed) and re.search(allowed, reason) is not None
        lines.append(f"{'skipped' if ok or not strict else 'SKIPPED, NOT ALLOWED'}: {test.id()}: {reason}")
        if not ok:
            unexpected.append(test.id())
    for line in lines:
        print(line)
    log = os.environ.get("FERRY_SKIP_LOG")
    if log and lines:
        with open(log, "a") as f:
            f.write("".join(line + "\n" for line in lines))
    if strict and unexpected:
        print(f"{len(unexpected)} test(s) skipped that this machine should run (FERRY_ALLOWED_SKIPS does not "
              f"name their reason): install what they need, or run with FERRY_STRICT_SKIPS=0")
        return 1
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
