"""The web server's hand-off of a request to an application thread and back, alone.

    .venv/bin/python bench/thread_handoff.py [--calls 20000] [--rounds 3] [--threads 2]
                                             [--loops uvloop,asyncio]

On each event loop of ``--loops`` (the web server runs on uvloop, granian's ``--loop uvloop``;
asyncio's own is what granian takes when uvloop is absent) it awaits ``--calls`` trivial
calls one after another, each made on another thread: through ``loop.run_in_executor`` on a
``ThreadPoolExecutor``, and through ``pool_admin.rsgi_bridge.AppThreads`` (the bridge's), with
``--threads`` threads each; then the cost of one ``asyncio.timeout`` block (the body deadline).
Prints CPU and wall microseconds per call, rounds and loops alternating. Each call finds its
thread idle, which is the costly case (a wake-up per call). Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pool_admin.rsgi_bridge import AppThreads


def _call(value: int) -> int:
    return value


async def _executor(calls: int, pool: ThreadPoolExecutor) -> None:
    loop = asyncio.get_running_loop()
    for number in range(calls):
        await loop.run_in_executor(pool, _call, number)


async def _app_threads(calls: int, threads: AppThreads) -> None:
    loop = asyncio.get_running_loop()
    for number in range(calls):
        await threads.run(loop, _call, number)


async def _timeouts(calls: int) -> None:
    for _ in range(calls):
        async with asyncio.timeout(5):
            pass


async def one_round(name: str, number: int, calls: int, threads: int) -> None:
    pool = ThreadPoolExecutor(threads)
    app_threads = AppThreads(threads, f"bench-{name}-{number}")
    ways: list[tuple[str, Callable[[], Awaitable[None]]]] = [
        ("loop.run_in_executor", lambda: _executor(calls, pool)),
        ("AppThreads.run", lambda: _app_threads(calls, app_threads)),
        ("asyncio.timeout block", lambda: _timeouts(calls)),
    ]
    for way_name, way in ways:
        cpu, wall = time.process_time(), time.perf_counter()
        await way()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        print(
            f"| {number} | {name} | {way_name} | {cpu * 1e6 / calls:.1f} "
            f"| {wall * 1e6 / calls:.1f} |"
        )
    pool.shutdown()


def main(calls: int, rounds: int, threads: int, loops: list[str]) -> None:
    print(f"{calls:,} calls per figure, {threads} threads, uvloop {uvloop.__version__}")
    print("| round | loop | way | CPU µs per call | wall µs per call |\n|---|---|---|---|---|")
    for number in range(1, rounds + 1):
        for name in loops:
            factory = uvloop.new_event_loop if name == "uvloop" else asyncio.new_event_loop
            with asyncio.Runner(loop_factory=factory) as runner:
                runner.run(one_round(name, number, calls, threads))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--loops", default="uvloop,asyncio")
    args = parser.parse_args()
    loops = args.loops.split(",")
    if not set(loops) <= {"uvloop", "asyncio"}:
        parser.error("--loops: uvloop, asyncio or both")
    main(args.calls, args.rounds, args.threads, loops)
