"""Every relative link in README.md, docs/, bench/README.md, examples/ and php-worker/README.md points to a file
that exists, and every #anchor to a heading of that file (GitHub's anchor rules). Usage: links.py ROOT"""

import os
import re
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def anchors(path):
    """GitHub's heading anchors: lower case, punctuation but - and _ dropped, spaces to -, duplicates -1, -2."""
    seen, out = {}, set()
    fenced = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line):
                fenced = not fenced
            if fenced or not line.startswith("#"):
                continue
            text = line.lstrip("#").strip().lower()
            text = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
            n = seen.get(text, 0)
            seen[text] = n + 1
            out.add(text if n == 0 else f"{text}-{n}")
    return out


def check(root):
    files = [os.path.join(root, "README.md"), os.path.join(root, "bench", "README.md"),
             os.path.join(root, "php-worker", "README.md")]
    for d in ("docs", "examples"):
        for base, _, names in os.walk(os.path.join(root, d)):
            files += [os.path.join(base, n) for n in names if n.endswith(".md")]
    bad = []
    for md in files:
        fenced = False
        with open(md, encoding="utf-8") as f:
            for no, line in enumerate(f, 1):
                if FENCE.match(line):
                    fenced = not fenced
                if fenced:
                    continue
                for target in LINK.findall(line):
                    if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:, file:
                        continue
                    path, _, anchor = target.partition("#")
                    dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
                    where = f"{os.path.relpath(md, root)}:{no}: {target}"
                    if not os.path.exists(dest):
                        bad.append(f"{where}: no such file")
                    elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                        bad.append(f"{where}: no heading #{anchor} in {os.path.relpath(dest, root)}")
    return bad


if __name__ == "__main__":
    problems = check(sys.argv[1])
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)
