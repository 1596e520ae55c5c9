"""Slow request bodies against the web server as make run runs it: latency and memory.

    .venv/bin/python bench/slow_bodies.py [--connections 200] [--seconds 20] [--probes 40]
                                         [--database-url postgresql://...pool_admin_bench]

Starts a private ``redis-server``, stocks a pool, creates an API client (as bench/api.py does),
runs the web server exactly as ``make run`` does (``pool_admin.launcher.web_command``), then:

* measures ``GET /healthz`` and a valid ``POST /api/v1/extract`` (``--probes`` each, one at a
  time) and the web server's memory (RSS of all its processes) and threads, with nothing else
  going on;
* holds ``--connections`` slow-body connections open for ``--seconds``: half
  ``POST /admin/login/`` with a ``csrftoken`` cookie, half an extract with the API key, each
  declaring ``Content-Length: 1000`` and then sending one byte a second; a connection the
  server answers is replaced by a new one at once, as an attacker would;
* meanwhile (from 2 s after they start) probes both again, five of each at a time, one after
  another, for the whole ``--seconds`` (a probe gives up after 10 s), and prints latencies
  (p50 / p99 / max), the answers the slow connections got (and how long after their headers),
  peak RSS and threads.

Needs no wrk. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]

import redis  # noqa: E402
from api import (  # noqa: E402
    DEFAULT_DATABASE_URL,
    bench_env,
    children,
    create_client,
    delete_client,
    prepare_django,
    start_web,
    stop_web,
)
from redis_pool import fill  # noqa: E402

from activity import PoolOptions, RedisPool  # noqa: E402
from pool_admin.localservices import RedisServer  # noqa: E402


def tree(pid: int) -> list[int]:
    return [pid, *(p for child in children(pid) for p in tree(child))]


def memory_and_threads(pid: int) -> tuple[float, int]:
    """RSS in MiB and thread count, summed over ``pid`` and its descendants."""
    rss_kib, threads = 0, 0
    for p in tree(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss_kib += int(line.split()[1])
            elif line.startswith("Threads:"):
                threads += int(line.split()[1])
    return rss_kib / 1024, threads


def probe(url: str, data: bytes | None, headers: dict[str, str]) -> tuple[int | None, float]:
    request = urllib.request.Request(url, data=data, headers=headers)
    began = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
            status: int | None = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except OSError:
        status = None
    return status, (time.perf_counter() - began) * 1000


def probes(base: str, key: str, n: int) -> dict[str, list[tuple[int | None, float]]]:
    body = json.dumps({"count": 1, "mode": "partial"}).encode()
    auth = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    out: dict[str, list[tuple[int | None, float]]] = {"healthz": [], "extract": []}
    for _ in range(n):
        out["healthz"].append(probe(f"{base}/healthz", None, {}))
        out["extract"].append(probe(f"{base}/api/v1/extract", body, auth))
    return out


def summary(results: list[tuple[int | None, float]]) -> str:
    ms = sorted(t for _, t in results)
    statuses = collections.Counter(s for s, _ in results)
    p99 = ms[min(len(ms) - 1, round(len(ms) * 0.99))]
    return (
        f"p50 {statistics.median(ms):.1f} / p99 {p99:.1f} / max {ms[-1]:.1f} ms, "
        f"statuses {dict(statuses)}"
    )


class SlowClients:
    """``count`` connections trickling bodies, replaced as soon as the server answers one."""

    def __init__(self, port: int, key: str, count: int) -> None:
        self.port, self.count = port, count
        cookie = b"Cookie: csrftoken=" + b"a" * 32 + b"\r\n"
        self.heads = [
            b"POST /admin/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n" + cookie
            + b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\n",
            b"POST /api/v1/extract HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
            + key.encode()
            + b"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n",
        ]  # fmt: skip
        self.answers: collections.Counter[str] = collections.Counter()
        self.answered_after: list[float] = []
        self.opened = 0
        self.stop = threading.Event()
        self.selector = selectors.DefaultSelector()

    def _open(self) -> None:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        sock.sendall(self.heads[self.opened % 2] + b"x")
        sock.setblocking(False)
        self.selector.register(sock, selectors.EVENT_READ, time.monotonic())
        self.opened += 1

    def run(self) -> None:
        for _ in range(self.count):
            self._open()
        next_byte = time.monotonic() + 1
        while not self.stop.is_set():
            for key, _ in self.selector.select(timeout=0.1):
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    data = sock.recv(4096)
                except OSError:
                    data = b""
                parts = data.split(b" ", 2)
                self.answers[parts[1].decode() if len(parts) > 1 else "closed"] += 1
                self.answered_after.append(time.monotonic() - key.data)
                self.selector.unregister(sock)
                sock.close()
                self._open()
            if time.monotonic() >= next_byte:
                next_byte += 1
                for key in list(self.selector.get_map().values()):
                    with contextlib.suppress(OSError):
                        key.fileobj.send(b"x")  # type: ignore[union-attr]
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--probes", type=int, default=40)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-slow-"))
    prefix, client_name = f"bench{uuid.uuid4().hex[:8]}", f"bench-{uuid.uuid4().hex[:8]}"
    web: subprocess.Popen[bytes] | None = None
    try:
        with RedisServer(tmp / "redis") as server:
            env = bench_env(args.database_url, server.url, prefix)
            prepare_django(env)
            client = redis.Redis.from_url(server.url, socket_timeout=30)
            fill(RedisPool(client, PoolOptions(prefix=prefix)), 0, 50_000)
            key = create_client(client_name)
            web, base, argv = start_web(env, tmp)
            print(f"web server (as make run): {' '.join(argv[1:])}")
            probes(base, key, 5)  # warm-up: every worker has verified the key
            quiet = probes(base, key, args.probes)
            rss, threads = memory_and_threads(web.pid)
            print(f"quiet:  RSS {rss:.0f} MiB, {threads} threads")
            for name, results in quiet.items():
                print(f"  {name:8s} {summary(results)}")

            slow = SlowClients(int(base.rsplit(":", 1)[1]), key, args.connections)
            runner = threading.Thread(target=slow.run)
            runner.start()
            time.sleep(2)
            ended = time.monotonic() + args.seconds
            loaded: dict[str, list[tuple[int | None, float]]] = {"healthz": [], "extract": []}
            peak_rss, peak_threads = 0.0, 0
            while time.monotonic() < ended:
                for name, results in probes(base, key, 5).items():
                    loaded[name] += results
                rss, threads = memory_and_threads(web.pid)
                peak_rss, peak_threads = max(peak_rss, rss), max(peak_threads, threads)
            slow.stop.set()
            runner.join()
            after = sorted(slow.answered_after)
            print(
                f"with {args.connections} slow-body connections open for {args.seconds:g} s: "
                f"peak RSS {peak_rss:.0f} MiB, peak {peak_threads} threads"
            )
            for name, results in loaded.items():
                print(f"  {name:8s} {summary(results)}")
            if after:
                print(
                    f"  slow connections: {slow.opened} opened, answers {dict(slow.answers)}, "
                    f"answered after p50 {statistics.median(after):.1f} s, max {after[-1]:.1f} s"
                )
            delete_client(client_name)
        return 0
    finally:
        if web is not None:
            stop_web(web)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
