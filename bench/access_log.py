"""What one access log line costs the web server's process: granian's (a Python log record per
request) against the bridge's (a line queued, written in batches by ``LogBatches``).

    .venv/bin/python bench/access_log.py [--lines 50000] [--rounds 3]

Each figure is this process's CPU time (all its threads: the batch writer's too) per line,
writing ``--lines`` lines, best of ``--rounds``, to two destinations: ``/dev/null``, and a pipe
read by another process (``cat``), as a terminal or a supervisor reads the web server's output.
``granian`` calls granian's own access logger (``granian.log.log_request_builder`` with its
default format and logging configuration), as its ``--access-log`` does for each request;
``bridge`` calls ``AccessLog.write`` (pool_admin/rsgi_bridge.py) into a ``LogBatches`` writing
to a logger configured as settings.LOGGING configures ``pool_admin.access``, then flushes.
Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from granian.log import DEFAULT_ACCESSLOG_FMT, LogLevels, configure_logging, log_request_builder

from activity.log_batches import LogBatches
from pool_admin.rsgi_bridge import AccessLog

REQUEST = {
    "addr_remote": "127.0.0.1",
    "protocol": "HTTP/1.1",
    "path": "/api/v1/extract",
    "qs": "",
    "method": "POST",
    "scheme": "http",
}
ENVIRON = {"REMOTE_ADDR": "127.0.0.1", "REQUEST_METHOD": "POST", "SERVER_PROTOCOL": "HTTP/1.1"}


def granian_lines(lines: int) -> Callable[[], None]:
    configure_logging(LogLevels.info)  # its handler writes to sys.stdout as it is now
    log_request = log_request_builder(DEFAULT_ACCESSLOG_FMT)

    def run() -> None:
        for _ in range(lines):
            log_request(time.time(), time.perf_counter(), REQUEST, 200)

    return run


def bridge_lines(lines: int) -> Callable[[], None]:
    logger = logging.getLogger("bench.access")
    logger.handlers[:] = []
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    # The interval is long: the run's own flush writes the lines, as the writer thread would.
    batches = LogBatches(logger, name="bench", max_queued=lines, interval_s=3600)
    access = AccessLog(batches.add)

    def run() -> None:
        for _ in range(lines):
            access.write((time.time(), time.perf_counter()), ENVIRON, "/api/v1/extract", 200)
        batches.flush()

    return run


def cpu_per_line(run: Callable[[], None], lines: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        run()
        best = min(best, time.process_time() - started)
    return best / lines * 1e6


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    report = sys.stderr
    print("CPU µs per access log line (this process, all threads), best of", args.rounds,
          file=report)  # fmt: skip
    print("| destination | granian's (a log record per line) | the bridge's (batched) |",
          file=report)  # fmt: skip
    print("|---|---|---|", file=report)
    saved = sys.stdout
    reader = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert reader.stdin is not None
    try:
        for name, stream in (
            ("/dev/null", open(os.devnull, "w")),  # noqa: SIM115  (closed below)
            ("a pipe read by cat", os.fdopen(os.dup(reader.stdin.fileno()), "w")),
        ):
            sys.stdout = stream
            try:
                figures = [
                    cpu_per_line(make(args.lines), args.lines, args.rounds)
                    for make in (granian_lines, bridge_lines)
                ]
            finally:
                sys.stdout = saved
                stream.close()
            print(f"| {name} | {figures[0]:.2f} | {figures[1]:.2f} |", file=report)
    finally:
        reader.stdin.close()
        reader.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
