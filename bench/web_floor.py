"""Floors for the extract API's figures: what the web server alone, and with one or two Redis
round trips, can serve on this machine.

    .venv/bin/python bench/web_floor.py [--seconds 8] [--clients 32] [--calls 0,1,2]
                                        [--interfaces rsgi,rsgi-inline,wsgi,haproxy] [--rounds 1]

For each ``--calls`` value and each interface it runs granian as ``make run`` runs the project
(``pool_admin.launcher.web_command``: workers, keep-alive, access log) but serving
``bench/floor_app.py``, which answers after that many trivial EVALSHA calls through redis-py to
a private ``redis-server``: ``rsgi`` through the RSGI bridge with its threads and its access
log, as ``make run`` serves the project; ``rsgi-inline`` the same with the application run on
the event loop, no thread hand-off (what the hand-off costs; never for the project); ``wsgi`` as
granian's WSGI interface with as many blocking threads and granian's access log, the project's
web server before the bridge; ``haproxy`` that behind HAProxy buffering each body
under a 5 s deadline for the whole request (needs ``haproxy``: ``apt-get install haproxy``),
its CPU shown as the front's. wrk (one thread, ``--clients`` connections) sends the
extract benchmark's request. It prints requests/s, latency and the CPU milliseconds per request
of the web server, redis-server and wrk, as bench/api.py does; ``--rounds`` repeats the whole
set, interfaces alternating, for a before/after in one session. Needs ``wrk``. Not part of
``make test``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]

from api import BODY, WRK_SCRIPT, run_wrk, tree_cpu, wait_serving  # noqa: E402

from pool_admin.launcher import WEB_APPLICATION, web_command  # noqa: E402
from pool_admin.localservices import RedisServer, free_port  # noqa: E402

#: HAProxy in front of granian's WSGI interface, buffering each body (``option
#: http-buffer-request``) under one deadline for the whole request (``timeout http-request``),
#: the other way to keep a slow body off an application thread (docs/DECISIONS.md).
HAPROXY_CONFIG = """global
  nbthread 1
  maxconn 4096
defaults
  mode http
  option http-buffer-request
  option forwardfor
  timeout http-request 5s
  timeout http-keep-alive 30s
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend web
  bind 127.0.0.1:{front}
  default_backend granian
backend granian
  http-reuse always
  server granian 127.0.0.1:{port} maxconn 512
"""
INTERFACES = ("rsgi", "rsgi-inline", "wsgi", "haproxy")


def floor_command(bind: str, interface: str) -> list[str]:
    """``make run``'s web server command serving the floor application on ``interface``
    (``haproxy``: granian's WSGI interface, behind HAProxy)."""
    argv = web_command(bind)
    argv[argv.index(WEB_APPLICATION)] = "floor_app:rsgi_application"
    if interface == "rsgi-inline":
        argv[argv.index("floor_app:rsgi_application")] = "floor_app:rsgi_inline_application"
    elif interface != "rsgi":
        argv[argv.index("floor_app:rsgi_application")] = "floor_app:application"
        argv[argv.index("--interface") + 1] = "wsgi"
        # granian's own access log, as the project's web server had before the bridge wrote it.
        argv += ["--blocking-threads", os.environ.get("FLOOR_THREADS", "2"), "--access-log"]
    return argv


@contextlib.contextmanager
def serving(
    interface: str, calls: int, redis_url: str, tmp: Path
) -> Iterator[tuple[str, list[int]]]:
    """The base URL to send to, and the pids of the web server and of its front (if any)."""
    port = free_port()
    env = {**os.environ, "FLOOR_CALLS": str(calls), "FLOOR_REDIS_URL": redis_url}
    started: list[subprocess.Popen[bytes]] = []
    try:
        started.append(subprocess.Popen(
            floor_command(f"127.0.0.1:{port}", interface), cwd=ROOT / "bench", env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        ))  # fmt: skip
        wait_serving(f"http://127.0.0.1:{port}", started[0])
        base = f"http://127.0.0.1:{port}"
        if interface == "haproxy":
            front = free_port()
            config = tmp / "haproxy.cfg"
            config.write_text(HAPROXY_CONFIG.format(front=front, port=port))
            started.append(subprocess.Popen(
                ["haproxy", "-f", str(config), "-db"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True,
            ))  # fmt: skip
            base = f"http://127.0.0.1:{front}"
            wait_serving(base, started[1])
        yield base, [process.pid for process in started]
    finally:
        for process in reversed(started):
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--calls", default="0,1,2")
    parser.add_argument("--interfaces", default="rsgi,wsgi")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    interfaces = args.interfaces.split(",")
    if not set(interfaces) <= set(INTERFACES):
        parser.error(f"--interfaces: some of {', '.join(INTERFACES)}")
    if "haproxy" in interfaces and shutil.which("haproxy") is None:
        print("bench/web_floor.py --interfaces haproxy needs haproxy: apt-get install haproxy")
        return 2
    with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp) / "redis") as server:
        script = Path(tmp) / "floor.lua"
        text = WRK_SCRIPT.replace("__BODY__", BODY).replace("__KEY__", "floor")
        script.write_text(text.replace("__OUT__", str(Path(tmp) / "floor")))
        print(
            f"{args.seconds:g} s, {args.clients} connections, one wrk thread\n"
            "| Redis calls per request | interface | requests/s | p50 ms | p99 ms "
            "| CPU ms per request: web / front / redis / wrk |\n|---|---|---|---|---|---|"
        )
        runs = [
            (calls, interface)
            for _ in range(args.rounds)
            for calls in [int(c) for c in args.calls.split(",")]
            for interface in interfaces
        ]
        for calls, interface in runs:
            with serving(interface, calls, server.url, Path(tmp)) as (base, pids):
                run_wrk(base, script, 4, 2)  # warm-up
                measured = [*pids[:1], pids[1] if len(pids) > 1 else 0, server.pid or 0]
                before = [tree_cpu(pid) if pid else 0.0 for pid in measured], os.times()
                r = run_wrk(base, script, args.clients, args.seconds)
                after = [tree_cpu(pid) if pid else 0.0 for pid in measured], os.times()
            n = float(r["requests"])  # type: ignore[arg-type]
            wrk_cpu = (after[1].children_user + after[1].children_system) - (
                before[1].children_user + before[1].children_system
            )
            rate = n / (float(r["duration_us"]) / 1e6)  # type: ignore[arg-type]
            cpu = [(a - b) * 1000 / n for a, b in zip(after[0], before[0], strict=True)]
            print(
                f"| {calls} | {interface} | {rate:,.0f} | {float(r['p50_us']) / 1000:.1f} "  # type: ignore[arg-type]
                f"| {float(r['p99_us']) / 1000:.1f} "  # type: ignore[arg-type]
                f"| {cpu[0]:.2f} / {cpu[1]:.2f} / {cpu[2]:.2f} / {wrk_cpu * 1000 / n:.2f} |"
            )
            time.sleep(0.5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
