"""What the fork tests (test_fork.py, test_fork_php_level.py) read of the processes: the template's pid from the
log, a process's command line and parent."""


def template_pid(server):
    """The template's pid, from its 'ready' log line."""
    for line in server.stderr().splitlines():
        if "ready: new workers are forked from it" in line:
            return int(line.split("template ", 1)[1].split(" ", 1)[0])
    return None


def template_pid_after(server, old):
    pids = []
    for line in server.stderr().splitlines():
        if "ready: new workers are forked from it" in line:
            pids.append(int(line.split("template ", 1)[1].split(" ", 1)[0]))
    later = [p for p in pids if p != old]
    return later[-1] if later else None


# opcache in the CLI; file_update_protection=0: a script changed in the last 2 s (a fresh checkout) is cached too.
OPCACHE = "-d opcache.enable=1 -d opcache.enable_cli=1 -d opcache.file_update_protection=0"


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode() for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def parent_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0
