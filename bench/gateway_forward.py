"""The gateway worker's forwarding, side by side (issue 25): ``bench/gateway.py --part forward``.

Topology, as in ../shared/research/gateways.md §5: load client -> system under test -> Debian
tinyproxy with Basic auth (THE upstream) -> a loopback nginx serving a 1 KiB body. Systems:

* ``direct``: the load client straight to tinyproxy (the ceiling of every other row);
* ``bare``: bench/bare_forwarder.py, a bare uvloop forwarder doing no auth and no selection
  (Protocol level, one fixed upstream, a new upstream connection per request): the floor a
  Python forwarder can reach, to judge the worker against in the same run;
* ``worker``: ``python -m gateway_runtime`` with a snapshot of 10 proxies, all that tinyproxy,
  from bench/gateway_control_standin.py (skipped, saying why, while the worker cannot start);
* ``squid``: Debian's squid as a child of tinyproxy (``cache_peer ... parent ... login=``,
  ``never_direct``, no cache), no client auth;
* ``pproxy``: pproxy 2.7.9 on uvloop 0.21 (it failed to start on 0.23 in the research run),
  from PyPI into its own venv under .run/bench-venv (not a project dependency), client auth on.

Loads, from bench/loadclient.c (one epoll thread, compiled at run time): keep-alive HTTP
(absolute-URI GETs with Proxy-Authorization) at 32 and 100 connections, and tunnels (CONNECT,
one GET over it, close) at 32. nginx is measured alone first (keep-alive, and connect-GET-close)
to show it is far above the proxies; the client prints its own CPU so it can be seen not to be
the limit. Rounds interleave the systems (each round: every system in turn); the table holds
the medians of the rounds. CPU per 1,000 is the system's own (utime + stime from /proc, its
process tree included) over the measured window only.

How each system is started is bench/forward_systems.py; this file is the loads, the rounds and
the table. Installs what is missing: nginx, squid, tinyproxy, gcc (apt-get, as
pool_admin.localservices does for the project's own services). Everything runs on 127.0.0.1
free ports under a temporary directory.
"""

from __future__ import annotations

import argparse
import base64
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]

from forward_systems import (  # noqa: E402
    BODY_BYTES,
    UP_PASSWORD,
    UP_USER,
    WORKER_TOKEN,
    bare,
    compile_client,
    nginx,
    pproxy,
    squid,
    tree_cpu,
    worker,
)
from gateway_control_standin import BENCH_KEY, ControlStandin, Upstream  # noqa: E402

from pool_admin.forward_proxies import ForwardProxy, Tinyproxy  # noqa: E402
from pool_admin.localservices import ensure_installed, forward_proxy_binary  # noqa: E402

#: Debian packages the part runs, and how to tell each is there.
PACKAGES: dict[str, Callable[[], object]] = {
    "nginx": lambda: forward_proxy_binary("nginx"),
    "squid": lambda: forward_proxy_binary("squid"),
    "tinyproxy": lambda: forward_proxy_binary("tinyproxy"),
    "gcc": lambda: shutil.which("gcc"),
    # The load client's TLS rows link OpenSSL.
    "libssl-dev": lambda: Path("/usr/include/openssl/ssl.h").exists() or None,
}
#: (load client mode, connections), as the research run measured them.
LOADS = (("ka", 32), ("ka", 100), ("tunnel", 32))
#: ``--forward-tls``: tunnels carrying a full TLS handshake and the GET over it. Not by default:
#: here one nginx process completed only ~400 handshakes/s alone (OpenSSL 3.0; the client
#: spent ~1 ms of CPU on each too), so the row measures the target more than the proxies.
TLS_LOAD = ("tunnel-tls", 32)
SYSTEMS = ("direct", "bare", "worker", "squid", "pproxy")


def basic(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


# ---------------------------------------------------------------------------------- load
@dataclass
class Run:
    rate: float
    p50: float
    p99: float
    http_errors: int
    socket_errors: int
    server_closes: int
    reconnects: int
    first_bad_status: int
    client_cpu: float  # share of one core
    seconds: float
    cpu_per_1k: float | None


@dataclass
class System:
    name: str
    port: int
    auth: str
    pid: int | None
    runs: dict[tuple[str, int], list[Run]] = field(default_factory=dict)


class Load:
    def __init__(
        self, client: Path, target_ports: tuple[int, int], seconds: float, warmup: float
    ) -> None:
        #: nginx's plain and HTTPS ports; a TLS mode goes to the latter.
        self.client, self.target_ports = client, target_ports
        self.seconds, self.warmup = seconds, warmup

    def run(self, mode: str, port: int, auth: str, conns: int, pid: int | None) -> Run:
        argv = [str(self.client), mode, "127.0.0.1", str(port), "127.0.0.1"]
        target = self.target_ports[1] if mode.endswith("-tls") else self.target_ports[0]
        argv += [str(target), "/1k", auth, str(conns), str(self.seconds)]
        argv.append(str(self.warmup))
        cpu: list[float] = []
        figures: dict[str, str] = {}
        with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.strip() in ("start", "stop"):
                    if pid is not None:
                        cpu.append(tree_cpu(pid))
                elif "=" in line:
                    figures = dict(item.split("=", 1) for item in line.split())
        if proc.returncode != 0 or not figures:
            raise RuntimeError(f"the load client failed ({proc.returncode}): {' '.join(argv)}")
        requests = int(figures["requests"])
        seconds = float(figures["seconds"])
        return Run(
            rate=requests / seconds,
            p50=float(figures["p50_ms"]),
            p99=float(figures["p99_ms"]),
            http_errors=int(figures["http_errors"]),
            socket_errors=int(figures["socket_errors"]) + int(figures["timeouts"]),
            server_closes=int(figures["server_closes"]),
            reconnects=int(figures["reconnects"]),
            first_bad_status=int(figures["first_bad_status"]),
            client_cpu=float(figures["client_cpu_s"]) / seconds,
            seconds=seconds,
            cpu_per_1k=(cpu[1] - cpu[0]) / requests * 1000 if len(cpu) == 2 and requests else None,
        )


def describe(run: Run) -> str:
    cpu = f", CPU {run.cpu_per_1k:.3f} s/1k" if run.cpu_per_1k is not None else ""
    bad = f" (first {run.first_bad_status})" if run.first_bad_status else ""
    return (
        f"{run.rate:,.0f}/s, p50 {run.p50:.2f} ms, p99 {run.p99:.2f} ms{cpu}, errors "
        f"{run.http_errors}{bad} HTTP / {run.socket_errors} socket, connections closed after an "
        f"answer {run.server_closes + run.reconnects:,}, client {run.client_cpu:.0%} of a core"
    )


# ---------------------------------------------------------------------------------- the part
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--forward-rounds", type=int, default=3)
    parser.add_argument("--forward-seconds", type=float, default=10.0)
    parser.add_argument("--forward-warmup", type=float, default=2.0)
    parser.add_argument("--forward-systems", default=",".join(SYSTEMS))
    parser.add_argument("--forward-tls", action="store_true", help="add TLS tunnels")
    parser.add_argument(
        "--forward-before",
        type=Path,
        help="a checkout of an earlier commit (git worktree add DIR REV): its worker runs as "
        "one more system, worker-before, interleaved with the others (before/after in one run)",
    )


def bench_forward(args: argparse.Namespace) -> None:
    print("\n### Forwarding side by side (issue 25)\n")
    ensure_installed(PACKAGES)
    wanted = [s for s in SYSTEMS if s in args.forward_systems.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-forward-") as tmp:
        directory = Path(tmp)
        directory.chmod(0o711)  # squid's own user reaches its folder inside
        started: list[ForwardProxy] = []
        try:
            _run(args, directory, wanted, started)
        finally:
            for service in reversed(started):
                service.stop()


def _start(service: ForwardProxy, started: list[ForwardProxy]) -> ForwardProxy:
    service.start()
    started.append(service)
    return service


def _run(
    args: argparse.Namespace, directory: Path, wanted: list[str], started: list[ForwardProxy]
) -> None:
    client = compile_client(directory)
    target, tls_port = nginx(directory)
    _start(target, started)
    upstream = Tinyproxy(directory / "tinyproxy", UP_USER, UP_PASSWORD)
    _start(upstream, started)
    load = Load(client, (target.port, tls_port), args.forward_seconds, args.forward_warmup)

    print(f"- nginx alone ({BODY_BYTES}-byte body, one process), the client's own CPU beside:")
    loads = [*LOADS, TLS_LOAD] if args.forward_tls else list(LOADS)
    for mode, conns in [("ka", 32), ("ka", 100), ("close", 32)] + (
        [("close-tls", 32)] if args.forward_tls else []
    ):
        port = tls_port if mode.endswith("-tls") else target.port  # no proxy: nginx itself
        figures = load.run(mode, port, "-", conns, target.pid)
        label = {
            "ka": "keep-alive",
            "close": "connect, GET, close",
            "close-tls": "connect, TLS handshake, GET, close",
        }[mode]
        print(f"  - {label}, {conns} connections: {describe(figures)}")

    systems: list[System] = []
    standins: list[tuple[str, ControlStandin]] = []
    bench_auth = basic("bench", BENCH_KEY)
    for name in wanted:
        if name == "direct":
            auth = basic(UP_USER, UP_PASSWORD)
            systems.append(System(name, upstream.port, auth, upstream.pid))
        elif name == "bare":  # it ignores the client's Proxy-Authorization
            service = _start(bare(directory, upstream), started)
            systems.append(System(name, service.port, bench_auth, service.pid))
        elif name == "squid":
            service = _start(squid(directory, upstream), started)
            systems.append(System(name, service.port, bench_auth, service.pid))
        elif name == "pproxy":
            service = _start(pproxy(directory, upstream), started)
            # uvloop's extension is mapped once pproxy took it (its "Using uvloop" line sits
            # in a pipe buffer until it exits).
            maps = Path(f"/proc/{service.pid}/maps").read_text()
            loop = "uvloop 0.21" if "uvloop" in maps else "asyncio (uvloop not loaded)"
            print(f"- pproxy runs on {loop}")
            systems.append(System(name, service.port, bench_auth, service.pid))
        elif name == "worker":
            trees = [("worker", None)]
            if args.forward_before is not None:
                trees.append(("worker-before", args.forward_before.resolve()))
            for label, tree in trees:
                standin = ControlStandin(
                    Upstream("127.0.0.1", upstream.port, UP_USER, UP_PASSWORD), WORKER_TOKEN
                )
                running, why = worker(directory, standin.start(), tree)
                if running is None:
                    print(f"- {label}: skipped: {why}")
                    standin.stop()
                    continue
                started.append(running)
                systems.append(System(label, running.port, bench_auth, running.pid))
                standins.append((label, standin))

    for round_ in range(1, args.forward_rounds + 1):
        print(f"- round {round_}:")
        for system in systems:
            for mode, conns in loads:
                run = load.run(mode, system.port, system.auth, conns, system.pid)
                system.runs.setdefault((mode, conns), []).append(run)
                print(f"  - {system.name}, {mode} {conns}: {describe(run)}")
    for label, standin in standins:
        print(f"- {label}'s calls to its control plane during the run: {standin.calls}")
    _table(systems, args.forward_rounds, [load for load in loads if load[0].startswith("tunnel")])


def _median(runs: list[Run], attribute: str) -> float | None:
    values = [getattr(r, attribute) for r in runs if getattr(r, attribute) is not None]
    return statistics.median(values) if values else None


def _table(systems: list[System], rounds: int, tunnels: list[tuple[str, int]]) -> None:
    tls = len(tunnels) > 1
    print(f"\nMedians of {rounds} rounds; errors summed over all runs.\n")
    print(
        "| system | keep-alive req/s, 32 conns (share of direct) | 100 conns (share) "
        "| tunnels/s, 32 conns (share) "
        + ("| TLS tunnels/s, 32 conns (share) " if tls else "")
        + "| p50 / p99 ms: keep-alive 32; tunnels | CPU s per 1,000 requests / tunnels "
        + ("/ TLS tunnels " if tls else "")
        + "| errors HTTP / socket | client connections closed per keep-alive answer |"
    )
    print("|---" * (8 + tls) + "|")
    direct = next((s for s in systems if s.name == "direct"), None)

    def rate(system: System, load: tuple[str, int]) -> str:
        value = _median(system.runs[load], "rate") or 0.0
        base = _median(direct.runs[load], "rate") if direct else None
        share = f" ({value / base:.0%})" if base else ""
        return f"{value:,.0f}{share}"

    for s in systems:
        ka, tun = s.runs[("ka", 32)], s.runs[("tunnel", 32)]
        cpus = [_median(s.runs[load], "cpu_per_1k") for load in (("ka", 32), *tunnels)]
        cpu = " / ".join("-" if c is None else f"{c:.2f}" for c in cpus)
        if s.name == "direct":
            cpu = f"({cpu}: tinyproxy's own)"
        every = [r for runs in s.runs.values() for r in runs]
        errors = f"{sum(r.http_errors for r in every):,} / {sum(r.socket_errors for r in every):,}"
        kept = [r for load, runs in s.runs.items() if load[0] == "ka" for r in runs]
        answers = sum(r.rate for r in kept)  # per second: the same window in every run
        closed = sum((r.server_closes + r.reconnects) / r.seconds for r in kept)
        print(
            f"| {s.name} | {rate(s, ('ka', 32))} | {rate(s, ('ka', 100))} "
            f"| {' | '.join(rate(s, load) for load in tunnels)} "
            f"| {_median(ka, 'p50'):.2f} / {_median(ka, 'p99'):.2f}; "
            f"{_median(tun, 'p50'):.2f} / {_median(tun, 'p99'):.2f} | {cpu} | {errors} "
            f"| {closed / answers if answers else 0:.2f} |"
        )
    client = max(
        (r.client_cpu for s in systems for runs in s.runs.values() for r in runs), default=0
    )
    print(f"\nThe load client used at most {client:.0%} of a core in any run.")
    print(
        "- A closed connection after an answer: tinyproxy closes every client connection after "
        "its answer (an HTTP/1.1 answer without `Connection: close`); the client sends its next "
        "request on a new connection, as HTTP clients do, and counts it here, not as an error.\n"
        "- pproxy's keep-alive rows are not comparable: it opens one upstream tunnel per client "
        "connection and sends every request of that connection through it (one exit per "
        "connection, and tinyproxy only relays bytes).\n"
        "- bare (a uvloop forwarder doing no auth and no selection, a new tinyproxy connection "
        "per request) and squid ask no client login; the others do (direct: tinyproxy's Basic "
        "auth; worker and pproxy: the bench client's)."
    )
