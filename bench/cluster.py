"""Publish-to-delivery latency across Ferry nodes (issue 46; bench/README.md, "Cluster"): 1 to 1,000 WebSocket
receivers of one topic split over two nodes sharing it through Redis (websockets.broker: redis), against the
same receivers on one node (the memory broker), and Redis's own pub/sub floor (a PUBLISH seen by a plain
subscriber), all on this machine; then 10,000 messages per second in total through the two nodes, checked for
loss. The publisher is a relay-mode connection on node 1 (the core publishes what it sends: PHP is not on the
path); the receivers are Node `ws` clients (tests/e2e/node/fanout.js), the sender tests/e2e/node/sender.js.

    python3 bench/cluster.py [--receivers 1,10,100,1000] [--ferry build/ferry] [--out FILE]
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ferry_bench import ROOT, metrics_text, require, serve, stop  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
from redis_server import RedisServer  # noqa: E402

NODE_DIR = os.path.join(ROOT, "tests", "e2e", "node")


LOOPS = 2  # --loops: http.io_threads of each node


def node_config(broker, name):
    b = "" if broker is None else f"""
  broker:
    driver: redis
    addrs: ["{broker}"]
    node: {name}"""
    return f"""version: "3"
server:
  command: "php {ROOT}/tests/php/ws.php"
http:
  address: 127.0.0.1:0
  io_threads: {LOOPS}
  pool:
    num_workers: 1
websockets:
  path: /ws
  relay: true
  max_queue_messages: 100000
  max_queue_bytes: 64MB
  pool:
    num_workers: 2{b}
metrics:
  address: 127.0.0.1:0
"""


def metric(mport, name, labels=""):
    m = re.search(r"^" + re.escape(name) + (r"\{" + re.escape(labels) + r"\}" if labels else "") + r" (\S+)$",
                  metrics_text(mport), re.M)
    return float(m.group(1)) if m else None


def wait_subscribed(mports, want, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(metric(p, "ferry_broker_subscriptions") == want for p in mports):
            return
        time.sleep(0.05)
    raise RuntimeError("the nodes did not subscribe in time")


def fanout(urls, per_url, expect, timeout_ms):
    p = subprocess.Popen(["node", "fanout.js", json.dumps(dict(urls=urls, per_url=per_url, expect=expect,
                                                                timeout_ms=timeout_ms, raw=True))],
                         cwd=NODE_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready = json.loads(p.stdout.readline())
    if ready.get("opened") != len(urls) * per_url:
        raise RuntimeError(f"receivers: {ready}; {p.stderr.read()}")
    return p


def done(p, timeout=120):
    out, err = p.communicate(timeout=timeout)
    return json.loads(out.strip().splitlines()[-1])


def send(url, count, rate, tag):
    return subprocess.Popen(["node", "sender.js", json.dumps(dict(url=url, count=count, rate=rate, tag=tag))],
                            cwd=NODE_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def merge(a, b):
    """Two fanout summaries of the same run as one: counts added, percentiles of both processes' latencies."""
    out = dict(a)
    for k in ("conns", "opened", "complete", "received", "out_of_order", "duplicates"):
        out[k] = a[k] + b[k]
    out["latencies_ms"] = a["latencies_ms"] + b["latencies_ms"]
    for k, q in (("p50_ms", 0.5), ("p90_ms", 0.9), ("p99_ms", 0.99), ("max_ms", 1.0)):
        out[k] = pct(out["latencies_ms"], q)
    return out


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else None


def redis_floor(redis, count, rate):
    """PUBLISH on one connection, the message read on another (subscribed): Redis's own pub/sub latency with
    the same machine, clients in Python (their own cost included, as the Node clients' is above)."""
    sub = socket.create_connection(("127.0.0.1", redis.port))
    sub.sendall(b"*2\r\n$9\r\nSUBSCRIBE\r\n$5\r\nfloor\r\n")
    f = sub.makefile("rb")
    for _ in range(6):  # *3 $9 subscribe $5 floor :1
        f.readline()
    pub = socket.create_connection(("127.0.0.1", redis.port))
    pub.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    pf = pub.makefile("rb")
    lat = []
    start = time.monotonic()
    for i in range(count):
        due = start + i / rate
        while time.monotonic() < due:
            time.sleep(max(0, due - time.monotonic()))
        body = f"{time.time() * 1000:.3f}".encode()
        pub.sendall(b"*3\r\n$7\r\nPUBLISH\r\n$5\r\nfloor\r\n$%d\r\n%s\r\n" % (len(body), body))
        pf.readline()  # :1
        for _ in range(6):  # *3 $7 message $5 floor $n
            f.readline()
        payload = f.readline()[:-2]
        lat.append(time.time() * 1000 - float(payload))
    sub.close()
    pub.close()
    return lat


def latency_row(ferry, redis_addr, receivers, tmp):
    """One receivers count: (one node, memory) and (two nodes, redis): their summaries."""
    rate = min(500, max(20, 40000 // receivers))  # deliveries per second the clients can take on 2 CPUs
    count = max(200, min(2000, rate * 4))
    rows = {}
    for mode in ("one node", "two nodes"):
        procs = []
        try:
            n1 = serve(ferry, node_config(redis_addr if mode == "two nodes" else None, "node-1"),
                       tempfile.mkdtemp(dir=tmp))
            procs.append(n1[0])
            urls = {1: f"ws://127.0.0.1:{n1[1]}/ws?topics=bench"}
            # The receivers in two client processes in both modes (a Node process is one core at most):
            # one node, both to node 1; two nodes, one per node (1 receiver: on node 2, across Redis).
            if mode == "two nodes":
                n2 = serve(ferry, node_config(redis_addr, "node-2"), tempfile.mkdtemp(dir=tmp))
                procs.append(n2[0])
                urls[2] = f"ws://127.0.0.1:{n2[1]}/ws?topics=bench"
                split = {2: 1} if receivers == 1 else {1: receivers // 2, 2: receivers - receivers // 2}
                where = {n: urls[n] for n in split}
            else:
                split = {1: 1} if receivers == 1 else {1: receivers // 2, 3: receivers - receivers // 2}
                where = {n: urls[1] for n in split}
            clients = {n: fanout([where[n]], k, count, 60000) for n, k in split.items()}
            if mode == "two nodes":
                wait_subscribed([{1: n1, 2: n2}[n][2] for n in split], 1)
            s = send(urls[1], count, rate, "a")
            s.communicate(timeout=120)
            rows[mode] = {n: done(p) for n, p in clients.items()}
            if mode == "one node" and 3 in rows[mode]:  # one node: both processes' figures together
                a, b = rows[mode].pop(1), rows[mode].pop(3)
                rows[mode][1] = merge(a, b)
            rows[mode]["rate"] = rate
            rows[mode]["count"] = count
        finally:
            for p in procs:
                stop(p)
    return rows


def no_loss(ferry, redis_addr, tmp, total_rate=10000, seconds=5):
    procs = []
    try:
        n1 = serve(ferry, node_config(redis_addr, "node-1"), tempfile.mkdtemp(dir=tmp))
        procs.append(n1[0])
        n2 = serve(ferry, node_config(redis_addr, "node-2"), tempfile.mkdtemp(dir=tmp))
        procs.append(n2[0])
        url = {1: f"ws://127.0.0.1:{n1[1]}/ws?topics=bench", 2: f"ws://127.0.0.1:{n2[1]}/ws?topics=bench"}
        per_sender = total_rate * seconds // 2
        rx = fanout([url[1], url[2]], 2, 2 * per_sender, 120000)
        wait_subscribed([n1[2], n2[2]], 1)
        t0 = time.monotonic()
        senders = [send(url[1], per_sender, total_rate // 2, "a"), send(url[2], per_sender, total_rate // 2, "b")]
        sent = [json.loads(p.communicate(timeout=120)[0].strip().splitlines()[-1]) for p in senders]
        r = done(rx, timeout=180)
        dropped = sum(metric(m, "ferry_broker_dropped_total", f'reason="{why}"') or 0
                      for m in (n1[2], n2[2]) for why in ("down", "backlog", "invalid"))
        return dict(summary=r, sent=sent, seconds=time.monotonic() - t0, per_sender=per_sender,
                    broker_dropped=dropped)
    finally:
        for p in procs:
            stop(p)


def fmt(v):
    return "—" if v is None else f"{v:.2f}"


def med(values):
    values = sorted(v for v in values if v is not None)
    return values[(len(values) - 1) // 2] if values else None


def pair(summaries, key="p99_ms"):
    """'p50 / p99' medians over the rounds of one cell (None: not measured)."""
    if not summaries or summaries[0] is None:
        return "—"
    return f"{fmt(med(x['p50_ms'] for x in summaries))} / {fmt(med(x[key] for x in summaries))}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ferry", default=os.path.join(ROOT, "build", "ferry"))
    ap.add_argument("--receivers", default="1,10,100,1000")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the table gives medians")
    ap.add_argument("--loops", type=int, default=2, help="event loops per node (http.io_threads)")
    ap.add_argument("--out", help="also write the report here")
    args = ap.parse_args()
    global LOOPS
    LOOPS = args.loops
    require("bench/cluster.py", [args.ferry], ["node", "redis-server"])
    tmp = tempfile.mkdtemp(prefix="ferry-cluster-bench-")
    redis = RedisServer().start()
    counts = [int(x) for x in args.receivers.split(",")]
    runs = {n: [] for n in counts}
    try:
        floor = redis_floor(redis, 2000, 500)
        for r in range(args.rounds):
            for n in counts:
                print(f"cluster: round {r + 1}, {n} receiver(s)", file=sys.stderr)
                runs[n].append(latency_row(args.ferry, redis.address, n, tmp))
        print("cluster: 10,000 messages per second", file=sys.stderr)
        loss = no_loss(args.ferry, redis.address, tmp)
    finally:
        redis.close()
    version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    lines = [f"# Cluster: publish-to-delivery through Redis ({time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC)",
             "",
             f"- ferry {commit}; {os.cpu_count()} CPUs shared by Redis, the two nodes ({LOOPS} loop(s) each), the Node.js "
             f"clients and the sender; {version.split(' sha=')[0]}",
             "- publisher: a relay-mode WebSocket connection on node 1 (no PHP on the path); receivers: Node `ws` "
             "clients in two processes (tests/e2e/node/fanout.js); latency = receive time − send time (one clock)",
             f"- {args.rounds} rounds, interleaved; each cell the median over the rounds",
             f"- Redis's own floor (PUBLISH → a plain subscriber, Python clients, 2000 messages at 500/s): "
             f"p50 {fmt(pct(floor, 0.5))} ms, p99 {fmt(pct(floor, 0.99))} ms",
             "",
             "| receivers | msg/s | one node, memory: p50 / p99 ms | two nodes, redis: node 1 (publisher's) "
             "p50 / p99 | node 2 (across Redis) p50 / p99 | across ÷ one node, p99: median (rounds) | all delivered, "
             "in order, once |",
             "|---:|---:|---|---|---|---|---|"]
    for n in counts:
        one = [r["one node"][1] for r in runs[n]]
        local = [r["two nodes"].get(1) for r in runs[n]]
        remote = [r["two nodes"][2] for r in runs[n]]
        ratios = [b["p99_ms"] / a["p99_ms"] for a, b in zip(one, remote) if a["p99_ms"]]
        ok = all(x["complete"] == x["conns"] and not x["duplicates"] and not x["out_of_order"]
                 for x in one + remote + [x for x in local if x])
        lines.append(f"| {n} | {runs[n][0]['two nodes']['rate']} | {pair(one)} | {pair(local)} | {pair(remote)} | "
                     f"{fmt(med(x['p99_ms'] for x in remote) / med(x['p99_ms'] for x in one))}× "
                     f"({', '.join(fmt(x) for x in ratios)}) | {'yes' if ok else 'NO'} |")
    s = loss["summary"]
    lines += ["",
              f"10,000 messages per second in total for 5 s (two senders, one per node, {loss['per_sender']} "
              f"messages each; 4 receivers, 2 per node, each to get all {2 * loss['per_sender']}): "
              f"{s['received']} of {s['conns'] * 2 * loss['per_sender']} deliveries, {s['out_of_order']} out of order, "
              f"{s['duplicates']} duplicates, broker drops {int(loss['broker_dropped'])}; senders behind schedule by "
              f"{max(x['late_ms'] for x in loss['sent']):.0f} ms at most; delivery p50 {fmt(s['p50_ms'])} ms, "
              f"p99 {fmt(s['p99_ms'])} ms."]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        with open(args.out, "w") as f:
            f.write(report)


if __name__ == "__main__":
    main()
