"""make run's terminal: which log lines reach it and how many, its log files' bounds, the status
line from a real exposition, and a child run as another user writing to a launcher-opened log."""

import os
import pwd

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from pool_admin import run_logs
from pool_admin.run_logs import Echo, LogTail, NotableLines, open_log, rotate_if_over, tail
from pool_admin.run_status import FiguresUnavailable, StatusReporter, parse_figures

NOTABLE = [
    "[2026-12-04 04:35:01,123: WARNING/MainProcess] open files limited to 1024, 7400 wanted",
    "2026-12-04 04:35:01,123 ERROR pool_admin.fetch_tasks: fetch of demo failed",
    "2026-12-04 04:35:01,123 gateway_runtime.server CRITICAL listener died",
    "[WARNING] granian worker 1 exited; respawning",
]
PLAIN = [
    "[2026-12-04 04:35:01,123: INFO/MainProcess] Task pool_admin.heartbeat[1] succeeded",
    "2026-12-04 04:35:01,123 INFO pool_admin.api: recovered from an ERROR: nothing lost",
    " -------------- celery@host v5.4.0 (opalescent)",
    '127.0.0.1 - "GET /api/v1/inventory" 500 3ms',
]


def test_warnings_errors_their_continuations_and_tracebacks_are_picked_and_nothing_else():
    pick = NotableLines()
    assert [line for line in NOTABLE + PLAIN if pick(line)] == NOTABLE
    traceback = [
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in <module>',
        "    boom()",
        "ValueError: boom",
    ]
    lines = [PLAIN[0], *traceback, PLAIN[0], NOTABLE[1], "    its detail, indented", PLAIN[1]]
    pick = NotableLines()
    assert [line for line in lines if pick(line)] == [
        *traceback,
        NOTABLE[1],
        "    its detail, indented",
    ]


def test_echo_shows_a_bounded_number_per_window_and_says_how_many_it_left_out(tmp_path):
    path = tmp_path / "logs" / "check-worker.log"
    log = open_log(path, "check worker")
    start = log.tell()
    now = [0.0]
    shown: list[str] = []
    echo = Echo("check worker", LogTail(path, start), shown.append, clock=lambda: now[0])
    burst = run_logs.ECHO_LINES_PER_WINDOW + 70
    for n in range(burst):
        log.write(f"2026-12-04 04:35:01 WARNING x: crash {n}\n2026-12-04 INFO x: fine\n".encode())
    log.write(b"2026-12-04 04:35:01 ERROR x: half a li")  # no newline yet: not read as a line
    log.flush()
    for _ in range(20):  # bounded reads: a burst takes a few ticks
        echo.pump()
    assert len(shown) == run_logs.ECHO_LINES_PER_WINDOW
    assert shown[0] == "check worker: 2026-12-04 04:35:01 WARNING x: crash 0"
    now[0] += run_logs.ECHO_WINDOW_S
    log.write(b"ne\n")
    log.close()
    echo.finish()
    assert shown[-2].startswith("launcher: check worker: 70 more warning/error lines")
    assert str(path) in shown[-2]
    assert shown[-1] == "check worker: 2026-12-04 04:35:01 ERROR x: half a line"
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_a_log_over_its_bound_is_kept_once_as_dot_1_and_truncated_in_place(tmp_path, monkeypatch):
    path = tmp_path / "web.log"
    log = open_log(path, "web")
    log.write(b"2026 WARNING old\n" * 100)
    log.flush()
    tail_reader = LogTail(path, 0)
    assert len(tail_reader.read_lines()) == 101
    assert rotate_if_over(path, limit=1000)
    assert (tmp_path / "web.log.1").stat().st_size > 1000 and path.stat().st_size == 0
    assert (tmp_path / "web.log.1").stat().st_mode & 0o777 == 0o600  # the log's own mode
    log.write(b"2026 WARNING new\n")  # O_APPEND: the writer goes on at the new end
    log.close()
    assert tail_reader.read_lines() == ["2026 WARNING new"]
    tail_reader.close()
    assert not rotate_if_over(path, limit=1000)
    monkeypatch.setattr(run_logs, "LOG_MAX_BYTES", 10)
    open_log(path, "web again").close()  # over the bound at start: rotated first
    assert (tmp_path / "web.log.1").read_bytes() == b"2026 WARNING new\n"
    [header] = tail(path)
    assert header.startswith("==== ") and "make run: web again" in header


def exposition(managed: int, unextracted: int, extracted: int, requests: int) -> str:
    registry = CollectorRegistry()
    Gauge("proxypool_upstream_managed_proxies", "", ["upstream"], registry=registry).labels(
        "demo"
    ).set(managed)
    gauge = Gauge("proxypool_upstream_unextracted_proxies", "", ["upstream"], registry=registry)
    gauge.labels("demo").set(unextracted - 1)
    gauge.labels("demo-socks5").set(1)
    Counter("proxypool_extract_calls", "", ["outcome"], registry=registry).labels("ok").inc(
        extracted
    )
    Counter("proxypool_extracted_proxies", "", ["upstream"], registry=registry).labels("demo").inc(
        extracted * 2
    )
    Counter("proxypool_gateway_requests", "", ["group", "upstream"], registry=registry).labels(
        "local", "demo"
    ).inc(requests)
    return generate_latest(registry).decode()


def test_the_status_line_shows_the_inventory_and_per_minute_rates_over_its_interval():
    texts = iter([exposition(10, 8, 1, 5), exposition(12, 9, 4, 35)])
    now = [100.0]
    lines: list[str] = []
    status = StatusReporter(
        "http://x",
        30,
        lines.append,
        read=lambda _: parse_figures(next(texts)),
        clock=lambda: now[0],
    )
    status.start()
    status.tick()
    assert lines == []  # not due yet
    now[0] += 30
    status.tick()
    assert lines == [
        "status: pool 12 proxies, 9 not extracted | extract calls 6/min (12 proxies/min) | "
        "gateway 60 requests/min"
    ]


def test_the_status_line_says_briefly_when_the_figures_cannot_be_read():
    def unreadable(_: str):
        raise FiguresUnavailable("HTTP 403")

    lines: list[str] = []
    now = [0.0]
    status = StatusReporter("http://x", 5, lines.append, read=unreadable, clock=lambda: now[0])
    status.start()
    now[0] += 5
    status.tick()
    assert lines == ["status: figures unavailable (HTTP 403)"]
    with pytest.raises(FiguresUnavailable, match="no pool figures"):
        parse_figures("# nothing here\n")
    off = StatusReporter("http://x", 0, lines.append, read=unreadable, clock=lambda: now[0])
    now[0] += 1000
    off.tick()
    assert len(lines) == 1


def test_as_root_a_child_run_as_nobody_writes_to_the_log_the_launcher_opened(tmp_path):
    """The mechanism Celery's children use when the launcher is root; not root, nothing changes."""
    from pool_admin.launcher import REPO_DIR, spawn
    from pool_admin.run_user import celery_user, make_run_as

    if os.geteuid() != 0:
        assert celery_user(REPO_DIR, dict(os.environ)) == (None, None)
        return
    logs = tmp_path / "logs"  # 0700 root: the child could not open a file here itself
    run_as = make_run_as("nobody")
    try:
        child = spawn("celery beat", ["/bin/sh", "-c", 'id -u; id -G; echo "$HOME"'], logs, run_as)
        assert child.proc.wait(timeout=10) == 0
        assert child.echo is not None
        child.echo.finish()
        home = str(run_as.home)
    finally:
        run_as.cleanup()
    entry = pwd.getpwnam("nobody")
    lines = (logs / "celery-beat.log").read_text().splitlines()
    assert lines[1:] == [str(entry.pw_uid), str(entry.pw_gid), home]
    assert oct(logs.stat().st_mode & 0o777) == "0o700"
    assert not os.path.exists(home)
