"""Extract API benchmark: requests/s and latency of ``POST /api/v1/extract``, served as by make run.

    .venv/bin/python bench/api.py [--proxies 200000] [--seconds 15] [--clients 1,8,32]
                                  [--database-url postgresql://postgres@127.0.0.1:5432/pool_admin_bench]

Requires ``wrk`` (Debian: ``apt-get install wrk``); the script installs nothing and stops with a
message when it is missing. It

* starts a private ``redis-server`` (no persistence) so nothing else is measured, and stocks the
  pool under a fresh prefix with ``--proxies`` AVAILABLE proxies (``bench/redis_pool.fill``);
* uses the PostgreSQL at ``--database-url`` (default: the database ``pool_admin_bench`` on the
  machine's server; created when absent and migrated), creates an API client allowed everything
  with limits too high to throttle (100,000 requests/s, 10,000,000 proxies/min) and one API key,
  and deletes that client at the end;
* runs the web server exactly as ``make run`` does (``pool_admin.launcher.web_command``: granian,
  RSGI through the body-reading bridge, one worker per core, keep-alive, access log on;
  ``LOG_LEVEL`` INFO: one usage line per extract), ``POOL_DEV=1``, on a free loopback port,
  its logs in a temporary directory;
* warms up (3 s, 4 connections: every worker has verified the key and loaded the scripts), then
  runs wrk (one thread) for ``--seconds`` at each client count, each request
  ``{"count": 1, "mode": "partial"}``; wrk's Lua hook records every returned proxy ID and the
  status of every response;
* prints, per client count, requests/s, p50/p99/max latency (wrk's, closed loop), responses by
  status, 200s that returned no proxy, socket errors, and the CPU milliseconds per request spent
  by the web server (all its processes), redis-server and wrk (all share the same cores); then
  the number of duplicate proxy IDs over every response of the run (warm-up included), which
  must be 0.

It stops the web server and redis-server on the way out. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import timeit
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import psycopg
import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from redis_pool import fill  # noqa: E402  (bench/redis_pool.py)

from activity import PoolOptions, RedisPool  # noqa: E402
from pool_admin.launcher import web_command  # noqa: E402
from pool_admin.localservices import RedisServer, create_database_if_missing, free_port  # noqa: E402

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/pool_admin_bench"
BODY = '{"count":1,"mode":"partial"}'
CLK_TCK = os.sysconf("SC_CLK_TCK")

# One wrk thread; every response's status is counted and every proxy ID written to a file per
# thread (line-buffered, so nothing is lost when wrk exits). done() prints parseable lines.
WRK_SCRIPT = r"""
wrk.method = "POST"
wrk.body = '__BODY__'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer __KEY__"

local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("tid", counter)
  table.insert(threads, thread)
end

function init(args)
  statuses = {}
  empty = 0
  ids_file = io.open("__OUT__-" .. tid .. ".ids", "w")
  ids_file:setvbuf("line")
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  if status == 200 then
    local n = 0
    for id in string.gmatch(body, '"id"%s*:%s*"([^"]*)"') do
      ids_file:write(id, "\n")
      n = n + 1
    end
    if n == 0 then empty = empty + 1 end
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "RESULT %d %d %d %d %d %.1f %d %d %d %d %d\n",
    summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), latency.max, latency.mean,
    e.connect, e.read, e.write, e.timeout, e.status))
  for _, t in ipairs(threads) do
    for code, n in pairs(t:get("statuses")) do
      io.write(string.format("STATUS %d %d\n", code, n))
    end
    io.write(string.format("EMPTY %d\n", t:get("empty")))
  end
end
"""


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process, in seconds (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def tree_cpu(root: int) -> float:
    """CPU seconds of ``root`` and all its descendants."""
    return cpu_seconds(root) + sum(tree_cpu(child) for child in children(root))


def versions(database_url: str, redis_url: str) -> str:
    with psycopg.connect(database_url, connect_timeout=3) as conn:
        row = conn.execute("SHOW server_version").fetchone()
        pg = row[0] if row else "?"
    rv = redis.Redis.from_url(redis_url).info("server")["redis_version"]
    wrk = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.split("[")[0]
    return (
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, Redis {rv}, PostgreSQL {pg}, {wrk.strip()}"
    )


def machine_speed(redis_url: str) -> str:
    """Two figures that tell how fast this machine is today, for comparing runs across machines
    of the same kind (they have differed 2-3x between sessions: docs/PERFORMANCE.md)."""
    loop = min(timeit.repeat("sum(range(1000))", number=20_000, repeat=5)) / 20_000
    client = redis.Redis.from_url(redis_url)
    sha = client.script_load("return 1")
    calls = 2_000
    began = time.perf_counter()
    for _ in range(calls):
        client.evalsha(sha, 0)
    round_trip = (time.perf_counter() - began) / calls
    client.close()
    return (
        f"machine speed: sum(range(1000)) {loop * 1e6:.1f} µs (best of 5), "
        f"trivial EVALSHA round trip through redis-py {round_trip * 1e6:.0f} µs (mean of {calls:,})"
    )


def bench_env(database_url: str, redis_url: str, prefix: str) -> dict[str, str]:
    """The environment the benchmark's Django (and web server) runs with."""
    return {
        **os.environ,
        "POOL_DEV": "1",
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "POOL_PREFIX": prefix,
        "LOG_LEVEL": os.environ.get("LOG_LEVEL", "INFO"),
    }


def prepare_django(env: dict[str, str]) -> None:
    """The benchmark database made and migrated if needed, and Django set up in this process."""
    create_database_if_missing(env["DATABASE_URL"])
    migrate(env)
    setup_django(env)


def setup_django(env: dict[str, str]) -> None:
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pool_admin.settings")
    import django

    django.setup()


def migrate(env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
    )


def create_client(name: str) -> str:
    from pool_admin.config.models import ApiClient, ApiKey

    client = ApiClient(
        name=name,
        requests_per_second=100_000,
        proxies_per_minute=10_000_000,
        max_count_per_request=1_000,
    )
    client.save()
    _key, plaintext = ApiKey.objects.issue(client, name="bench")
    return plaintext


def delete_client(name: str) -> None:
    from pool_admin.config.models import ApiClient

    ApiClient.objects.filter(name=name).delete()


def wait_serving(base: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the web server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=1):
                return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"the web server did not answer within {timeout} s")


def start_web(
    env: dict[str, str], log_dir: Path, workers: int | None = None
) -> tuple[subprocess.Popen[bytes], str, list[str]]:
    """The web server as ``make run`` runs it, on a free port, logging to ``log_dir/web.log``,
    serving once this returns: (process, base URL, command line)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    argv = web_command(f"127.0.0.1:{port}", workers)
    with (log_dir / "web.log").open("wb") as log:  # the child keeps its own descriptor
        web = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    wait_serving(base, web)
    return web, base, argv


def stop_web(web: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the web server's process group, SIGKILL if it is still there after 20 s."""
    if web.poll() is None:
        os.killpg(web.pid, signal.SIGTERM)
        try:
            web.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(web.pid, signal.SIGKILL)
            web.wait()


def run_wrk(base: str, script: Path, connections: int, seconds: float) -> dict[str, object]:
    argv = [
        "wrk",
        "-t",
        "1",
        "-c",
        str(connections),
        "-d",
        f"{max(1, round(seconds))}s",
        "--timeout",
        "10s",
    ]
    argv += ["-s", str(script), f"{base}/api/v1/extract"]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"wrk failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    out: dict[str, object] = {"status": collections.Counter(), "empty": 0}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "RESULT":
            names = ["requests", "duration_us", "p50_us", "p99_us", "max_us", "mean_us",
                     "connect", "read", "write", "timeout", "bad_status"]  # fmt: skip
            out.update({n: float(v) for n, v in zip(names, parts[1:], strict=True)})
        elif parts[0] == "STATUS":
            out["status"][int(parts[1])] += int(parts[2])  # type: ignore[index]
        elif parts[0] == "EMPTY":
            out["empty"] = int(out["empty"]) + int(parts[1])  # type: ignore[call-overload]
    if "requests" not in out:
        raise RuntimeError(f"wrk gave no result:\n{proc.stdout}\n{proc.stderr}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--proxies", type=int, default=200_000)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument("--keep-logs", action="store_true", help="print the log directory")
    args = parser.parse_args()
    levels = [int(c) for c in args.clients.split(",")]

    if shutil.which("wrk") is None:
        print("bench/api.py needs wrk: apt-get install wrk (Debian)", file=sys.stderr)
        return 2

    tmp = Path(tempfile.mkdtemp(prefix="bench-api-"))
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    client_name = f"bench-{uuid.uuid4().hex[:8]}"
    try:
        return run(args, levels, tmp, prefix, client_name)
    finally:
        if not args.keep_logs:
            shutil.rmtree(tmp, ignore_errors=True)


def run(
    args: argparse.Namespace, levels: list[int], tmp: Path, prefix: str, client_name: str
) -> int:
    web: subprocess.Popen[bytes] | None = None
    created_client = False
    with RedisServer(tmp / "redis") as server:
        env = bench_env(args.database_url, server.url, prefix)
        try:
            prepare_django(env)
            print(versions(args.database_url, server.url))
            print(machine_speed(server.url))
            head = ["git", "rev-parse", "--short", "HEAD"]
            commit = subprocess.run(head, cwd=ROOT, capture_output=True, text=True).stdout
            print(f"commit: {commit.strip()}")

            client = redis.Redis.from_url(server.url, socket_timeout=30)
            pool = RedisPool(client, PoolOptions(prefix=prefix))
            began = time.perf_counter()
            fill(pool, 0, args.proxies)
            print(
                f"stocked {pool.inventory('u1'):,} proxies in {time.perf_counter() - began:.1f} s"
            )

            key = create_client(client_name)
            created_client = True

            web, base, argv = start_web(env, tmp, args.workers)
            print(f"web server (as make run): {' '.join(argv[1:])}; logs in {tmp}")

            def script_for(label: str) -> Path:
                path = tmp / f"{label}.lua"
                text = WRK_SCRIPT.replace("__BODY__", BODY).replace("__KEY__", key)
                path.write_text(text.replace("__OUT__", str(tmp / label)))
                return path

            run_wrk(base, script_for("warmup"), 4, 3)
            print(
                f"\n{args.seconds:g} s per level, one wrk thread, count=1 per request\n"
                "| clients | requests/s | p50 ms | p99 ms | max ms | responses by status "
                "| 200 without proxy | socket errors "
                "| CPU ms per request: web / redis / wrk |"
            )
            print("|---|---|---|---|---|---|---|---|---|")
            redis_pid = server.pid or 0
            for connections in levels:
                script = script_for(f"c{connections}")
                cpu0 = (tree_cpu(web.pid), cpu_seconds(redis_pid))
                wrk_before = os.times()
                r = run_wrk(base, script, connections, args.seconds)
                wrk_after = os.times()
                cpu1 = (tree_cpu(web.pid), cpu_seconds(redis_pid))
                wrk_cpu = (wrk_after.children_user + wrk_after.children_system) - (
                    wrk_before.children_user + wrk_before.children_system
                )
                n = float(r["requests"])  # type: ignore[arg-type]
                rate = n / (float(r["duration_us"]) / 1e6)  # type: ignore[arg-type]
                per_k = 1000 / n if n else 0.0
                statuses = ", ".join(
                    f"{code}: {count:,}"
                    for code, count in sorted(r["status"].items())  # type: ignore[attr-defined]
                )
                sock = sum(int(r[k]) for k in ("connect", "read", "write", "timeout"))  # type: ignore[call-overload]
                print(
                    f"| {connections} | {rate:,.0f} | {float(r['p50_us']) / 1000:.1f} "  # type: ignore[arg-type]
                    f"| {float(r['p99_us']) / 1000:.1f} | {float(r['max_us']) / 1000:.1f} "  # type: ignore[arg-type]
                    f"| {statuses} | {r['empty']} | {sock} "
                    f"| {(cpu1[0] - cpu0[0]) * per_k:.2f} / {(cpu1[1] - cpu0[1]) * per_k:.2f} "
                    f"/ {wrk_cpu * per_k:.2f} |",
                    flush=True,
                )

            ids: list[str] = []
            for path in sorted(tmp.glob("*.ids")):
                ids.extend(line for line in path.read_text().splitlines() if line)
            dup = len(ids) - len(set(ids))
            print(
                f"\nproxy IDs returned (warm-up included): {len(ids):,}; duplicates: {dup}; "
                f"left in the pool: {pool.inventory('u1'):,}"
            )
            return 1 if dup else 0
        finally:
            if web is not None:
                stop_web(web)
            if created_client:
                delete_client(client_name)
            if web is not None and args.keep_logs:
                print(f"(logs kept in {tmp})")


if __name__ == "__main__":
    sys.exit(main())
