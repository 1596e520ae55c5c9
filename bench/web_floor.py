"""Floors for the extract API's figures: what the web server alone, and with one or two Redis
round trips, can serve on this machine.

    .venv/bin/python bench/web_floor.py [--seconds 8] [--clients 32] [--calls 0,1,2]
                                        [--interfaces rsgi,wsgi] [--rounds 1]

For each ``--calls`` value and each interface it runs granian as ``make run`` runs the project
(``pool_admin.launcher.web_command``: workers, keep-alive, access log) but serving
``bench/floor_app.py``, which answers after that many trivial EVALSHA calls through redis-py to
a private ``redis-server``: ``rsgi`` through the RSGI bridge with its threads, as ``make run``
serves the project; ``wsgi`` as granian's WSGI interface with as many blocking threads, the
project's web server before the bridge. wrk (one thread, ``--clients`` connections) sends the
extract benchmark's request. It prints requests/s, latency and the CPU milliseconds per request
of the web server, redis-server and wrk, as bench/api.py does; ``--rounds`` repeats the whole
set, interfaces alternating, for a before/after in one session. Needs ``wrk``. Not part of
``make test``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]

from api import BODY, WRK_SCRIPT, cpu_seconds, run_wrk, tree_cpu, wait_serving  # noqa: E402

from pool_admin.launcher import WEB_APPLICATION, web_command  # noqa: E402
from pool_admin.localservices import RedisServer, free_port  # noqa: E402


def floor_command(bind: str, interface: str) -> list[str]:
    """``make run``'s web server command serving the floor application on ``interface``."""
    argv = web_command(bind)
    argv[argv.index(WEB_APPLICATION)] = "floor_app:rsgi_application"
    if interface == "wsgi":
        argv[argv.index("floor_app:rsgi_application")] = "floor_app:application"
        argv[argv.index("--interface") + 1] = "wsgi"
        argv += ["--blocking-threads", os.environ.get("FLOOR_THREADS", "2")]
    return argv


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--calls", default="0,1,2")
    parser.add_argument("--interfaces", default="rsgi,wsgi")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    interfaces = args.interfaces.split(",")
    if not set(interfaces) <= {"rsgi", "wsgi"}:
        parser.error("--interfaces: rsgi, wsgi or both")
    with tempfile.TemporaryDirectory() as tmp, RedisServer(Path(tmp) / "redis") as server:
        script = Path(tmp) / "floor.lua"
        text = WRK_SCRIPT.replace("__BODY__", BODY).replace("__KEY__", "floor")
        script.write_text(text.replace("__OUT__", str(Path(tmp) / "floor")))
        print(
            f"{args.seconds:g} s, {args.clients} connections, one wrk thread\n"
            "| Redis calls per request | interface | requests/s | p50 ms | p99 ms "
            "| CPU ms per request: web / redis / wrk |\n|---|---|---|---|---|---|"
        )
        runs = [
            (calls, interface)
            for _ in range(args.rounds)
            for calls in [int(c) for c in args.calls.split(",")]
            for interface in interfaces
        ]
        for calls, interface in runs:
            port = free_port()
            argv = floor_command(f"127.0.0.1:{port}", interface)
            env = {**os.environ, "FLOOR_CALLS": str(calls), "FLOOR_REDIS_URL": server.url}
            web = subprocess.Popen(
                argv, cwd=ROOT / "bench", env=env, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
            try:
                base = f"http://127.0.0.1:{port}"
                wait_serving(base, web)
                run_wrk(base, script, 4, 2)  # warm-up
                before = (tree_cpu(web.pid), cpu_seconds(server.pid or 0), os.times())
                r = run_wrk(base, script, args.clients, args.seconds)
                after = (tree_cpu(web.pid), cpu_seconds(server.pid or 0), os.times())
            finally:
                os.killpg(web.pid, signal.SIGTERM)
                web.wait(timeout=30)
            n = float(r["requests"])  # type: ignore[arg-type]
            wrk_cpu = (after[2].children_user + after[2].children_system) - (
                before[2].children_user + before[2].children_system
            )
            rate = n / (float(r["duration_us"]) / 1e6)  # type: ignore[arg-type]
            cpu = [(after[i] - before[i]) * 1000 / n for i in (0, 1)]  # type: ignore[operator]
            print(
                f"| {calls} | {interface} | {rate:,.0f} | {float(r['p50_us']) / 1000:.1f} "  # type: ignore[arg-type]
                f"| {float(r['p99_us']) / 1000:.1f} "  # type: ignore[arg-type]
                f"| {cpu[0]:.2f} / {cpu[1]:.2f} / {wrk_cpu * 1000 / n:.2f} |"
            )
            time.sleep(0.5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
