"""bench/fleet.py's measures and tables: CPU probes at a window's ends (the web server's
process tree and the manager's process from /proc, Redis's INFO cpu, this process, the whole
machine from /proc/stat), and the tables with where saturation shows."""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from api import tree_cpu
from fleet_sim import CONTROL_KINDS, CallStats, percentile

TICK_PERIOD_S = 2.0  # settings.OWNERSHIP_TICK_PERIOD
#: Past this share of what a part can use, the part is called saturated.
SATURATED = 0.9
#: Control p99 past this many times the first fleet level's: latency is climbing.
CLIMB = 4.0


@dataclass(frozen=True)
class Probe:
    wall: float
    epoch: float
    web: float
    redis: float
    manager: float
    fleet: float
    machine_busy: int
    machine_all: int


def probe(web_pid: int, tick_pid: int, client: redis.Redis) -> Probe:
    info = client.info("cpu")
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    times = os.times()
    return Probe(
        time.monotonic(),
        time.time(),
        tree_cpu(web_pid),
        float(info["used_cpu_sys"]) + float(info["used_cpu_user"]),
        tree_cpu(tick_pid),
        times.user + times.system,
        sum(fields) - idle,
        sum(fields),
    )


@dataclass
class Row:
    workers: int
    held: int
    stats: CallStats
    before: Probe
    after: Probe
    ticks: list[dict[str, Any]]

    @property
    def seconds(self) -> float:
        return self.after.wall - self.before.wall

    def cores(self, part: str) -> float:
        spent: float = getattr(self.after, part) - getattr(self.before, part)
        return spent / self.seconds

    @property
    def machine(self) -> float:
        spent = self.after.machine_all - self.before.machine_all
        return (self.after.machine_busy - self.before.machine_busy) / max(1, spent)

    def rate(self, kind: str) -> float:
        return self.stats.counts[kind] / self.seconds

    def control_samples(self) -> list[float]:
        return [s for k in CONTROL_KINDS for s in self.stats.latencies.get(k, [])]

    def tick_times(self) -> list[float]:
        return [t["s"] for t in self.ticks]


def _ms(samples: list[float], share: float) -> str:
    return "-" if not samples else f"{percentile(samples, share) * 1e3:.1f}"


def print_tables(rows: list[Row], args: argparse.Namespace, cores: int) -> None:
    print(f"\nwindow {args.duration:g} s a level; {args.extract_rate:g} extracts/s and "
          f"{args.upsert_rate} upserts/s throughout; each worker holds {args.hold} proxies, "
          f"{args.busy_share:.0%} of them busy; default intervals (heartbeat 10 s, snapshot "
          f"2 s, report 5 s, tick {TICK_PERIOD_S:g} s); CPU in cores\n")  # fmt: skip
    print("| workers | proxies held | control calls/s | extracts/s (errors) | web CPU "
          "| Redis CPU | manager CPU | fleet process CPU | machine busy "
          "| control p50 / p99 ms | extract p50 / p99 ms "
          "| ticks: n, p50 / max ms, over 2 s; assigned, renewed | control errors |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        control = r.control_samples()
        tick = r.tick_times()
        over = sum(1 for s in tick if s > TICK_PERIOD_S)
        extract_errors = sum(v for k, v in r.stats.errors.items() if k.startswith("extract"))
        control_errors = {k: v for k, v in r.stats.errors.items() if not k.startswith("extract")}
        done = [sum(t.get(k, 0) for t in r.ticks) for k in ("assigned", "renewed")]
        tick_text = (f"{len(tick)}, {statistics.median(tick) * 1e3:.0f} / {max(tick) * 1e3:.0f}, "
                     f"{over}; {done[0]:,}, {done[1]:,}" if tick else "0")  # fmt: skip
        print(f"| {r.workers} | {r.held:,} | {sum(r.rate(k) for k in CONTROL_KINDS):.1f} "
              f"| {r.rate('extract'):.1f} ({extract_errors}) | {r.cores('web'):.2f} "
              f"| {r.cores('redis'):.3f} | {r.cores('manager'):.3f} | {r.cores('fleet'):.2f} "
              f"| {r.machine:.0%} | {_ms(control, 0.5)} / {_ms(control, 0.99)} "
              f"| {_ms(r.stats.latencies.get('extract', []), 0.5)} / "
              f"{_ms(r.stats.latencies.get('extract', []), 0.99)} | {tick_text} "
              f"| {sum(control_errors.values())} {dict(control_errors) or ''} |")  # fmt: skip
    print("\nControl calls by kind: calls/s, p50 / p99 ms (to the answer's head)\n")
    print("| workers | " + " | ".join(CONTROL_KINDS) + " |")
    print("|---|" + "---|" * len(CONTROL_KINDS))
    for r in rows:
        cells = [
            f"{r.rate(k):.1f}, {_ms(r.stats.latencies.get(k, []), 0.5)} / "
            f"{_ms(r.stats.latencies.get(k, []), 0.99)}"
            for k in CONTROL_KINDS
        ]
        print(f"| {r.workers} | " + " | ".join(cells) + " |")
    _per_worker(rows)
    _saturation(rows, args, cores)


def _per_worker(rows: list[Row]) -> None:
    base = next((r for r in rows if r.workers == 0), None)
    print("\nPer worker, above " + ("level 0 (extracts and upserts alone)" if base else
                                    "nothing (no level 0 run)") + ": CPU ms per worker per "
          "second, and the workers one core of each part carries at that rate\n")  # fmt: skip
    print("| workers | web ms/s | Redis ms/s | manager ms/s | control calls/s | workers per "
          "web core | workers per Redis core | workers per manager core |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r.workers == 0:
            continue
        per = {
            part: (r.cores(part) - _baseline(base, r, part)) / r.workers * 1e3
            for part in ("web", "redis", "manager")
        }
        calls = sum(r.rate(k) for k in CONTROL_KINDS) / r.workers
        carry = [f"{1e3 / v:,.0f}" if v > 0 else "-" for v in per.values()]
        print(f"| {r.workers} | {per['web']:.2f} | {per['redis']:.3f} | {per['manager']:.3f} "
              f"| {calls:.2f} | " + " | ".join(carry) + " |")  # fmt: skip


def _baseline(base: Row | None, r: Row, part: str) -> float:
    """Level 0's cores of ``part``; the web's scaled to the extracts ``r`` got through (a
    loaded machine slows the open-loop sender, and the web's level-0 CPU is the extracts')."""
    if base is None:
        return 0.0
    if part == "web" and base.rate("extract") > 0:
        return base.cores(part) * r.rate("extract") / base.rate("extract")
    return base.cores(part)


def _saturation(rows: list[Row], args: argparse.Namespace, cores: int) -> None:
    web_cores = min(args.web_workers, cores)
    first = next((r for r in rows if r.workers > 0 and r.control_samples()), None)
    first_p99 = percentile(first.control_samples(), 0.99) if first else float("nan")
    print("\nWhere saturation shows:\n")
    for r in rows:
        signs = []
        if r.cores("web") >= SATURATED * web_cores:
            signs.append(f"web CPU {r.cores('web'):.2f} of {web_cores} cores")
        if r.cores("redis") >= SATURATED:
            signs.append(f"Redis CPU {r.cores('redis'):.2f} of its one core")
        if r.machine >= SATURATED:
            signs.append(f"the machine {r.machine:.0%} busy (every process, others' too)")
        if r.cores("fleet") >= SATURATED:
            signs.append("the fleet's own process near a core: the simulator is the limit")
        tick = r.tick_times()
        if tick and max(tick) > TICK_PERIOD_S:
            over = sum(1 for s in tick if s > TICK_PERIOD_S)
            signs.append(
                f"{over} of {len(tick)} ticks longer than their {TICK_PERIOD_S:g} s period"
            )
        if r.workers and len(tick) < 0.8 * r.seconds / TICK_PERIOD_S:
            signs.append(f"only {len(tick)} ticks in {r.seconds:.0f} s")
        control = r.control_samples()
        if first is not None and control and percentile(control, 0.99) > CLIMB * first_p99:
            signs.append(f"control p99 {percentile(control, 0.99) * 1e3:.0f} ms, over {CLIMB:g}x "
                         f"the {first.workers}-worker level's")  # fmt: skip
        skipped = r.stats.errors.get("extract skipped", 0)
        if skipped:
            signs.append(f"{skipped} extracts not sent ({len(r.stats.errors)} error kinds)")
        print(f"- {r.workers} workers: " + ("; ".join(signs) if signs else "none"))
