"""Health checks per second through real local forward proxies, at bounded concurrency.

    .venv/bin/python bench/checks.py [--records 500] [--concurrency 200] [--rounds 3]
                                     [--proxies 4] [--timeout 5]

Starts ``--proxies`` tinyproxy and as many microsocks processes on loopback (Debian's, with
credentials, as the demo runs them: pool_admin/forward_proxies.py) and a check URL server
(tests/harness/check_target.py: asyncio, 204 to every check), then checks ``--records`` proxy
records (half HTTP by absolute-URI GET, half SOCKS5; record i goes through proxy process i mod
n) with ``activity.checker.check_all`` at ``--concurrency`` on ``--loop`` (uvloop, or asyncio's
own), ``--rounds`` times. Prints, per
round, checks/s, p50/p99/max latency (the checker's, connection to status line) and failures,
and the CPU seconds of this process and of the proxy processes. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from activity.checker import CheckTarget, ProxyEndpoint  # noqa: E402
from activity.checker.runner import LOOPS, check_all  # noqa: E402
from pool_admin.forward_proxies import ForwardProxy, Microsocks, Tinyproxy  # noqa: E402
from tests.harness.check_target import check_target  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def percentile(values: list[int], share: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--proxies", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument(
        "--loop",
        choices=LOOPS,
        default="uvloop",
        help="the event loop the checks run on (activity.checker.check_all)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack, check_target() as target:
        servers: list[ForwardProxy] = []
        for n in range(args.proxies):
            for kind in (Tinyproxy, Microsocks):
                servers.append(stack.enter_context(kind(Path(tmp), f"user{n}", f"pass{n}")))
        records = [
            ProxyEndpoint("127.0.0.1", s.port, s.protocol, s.username, s.password)
            for s in (servers[i % len(servers)] for i in range(args.records))
        ]
        check = CheckTarget(target.url())
        print(f"{args.records} records over {len(servers)} proxy processes "
              f"({args.proxies} tinyproxy, {args.proxies} microsocks), concurrency "
              f"{args.concurrency}, timeout {args.timeout:g} s, loop {args.loop}")  # fmt: skip
        print("| round | checks/s | p50 ms | p99 ms | max ms | failed | CPU s: checker / proxies |")
        print("|---|---|---|---|---|---|---|")
        for round_ in range(1, args.rounds + 1):
            proxy_cpu = sum(cpu_seconds(s._proc.pid) for s in servers if s._proc)
            own_cpu, started = time.process_time(), time.perf_counter()
            results = check_all(records, check, concurrency=args.concurrency,
                                timeout=args.timeout, loop=args.loop)  # fmt: skip
            took = time.perf_counter() - started
            own_cpu = time.process_time() - own_cpu
            proxy_cpu = sum(cpu_seconds(s._proc.pid) for s in servers if s._proc) - proxy_cpu
            latencies = [r.latency_ms for r in results if r.latency_ms is not None]
            failed = sum(not r.ok for r in results)
            print(f"| {round_} | {len(results) / took:,.0f} | {statistics.median(latencies):.0f} "
                  f"| {percentile(latencies, 0.99)} | {max(latencies)} | {failed} "
                  f"| {own_cpu:.2f} / {proxy_cpu:.2f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
