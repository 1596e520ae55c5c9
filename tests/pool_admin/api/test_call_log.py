"""The API call log: lines queued per process, written in batches, bounded, never with a secret."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest

from pool_admin import bootstrap
from pool_admin.api import call_log
from pool_admin.api.call_log import call_lines, flush_call_log, log_call
from tests.harness.commands import run_python


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return call_lines([r.getMessage() for r in caplog.records if r.name == "pool_admin.calls"])


@pytest.fixture(autouse=True)
def _empty_queue(caplog):
    caplog.set_level(logging.INFO, logger="pool_admin.calls")
    flush_call_log()  # nothing left over from another test
    caplog.clear()


def test_events_are_written_together_one_line_each(caplog):
    before = time.time()
    for n in range(3):
        log_call({"event": "extract", "returned": n, "client": "c1"})
    assert _lines(caplog) == []  # queued, not yet written
    flush_call_log()
    records = [r for r in caplog.records if r.name == "pool_admin.calls"]
    assert len(records) == 1
    events = [json.loads(line.removeprefix("call ")) for line in _lines(caplog)]
    assert [e["returned"] for e in events] == [0, 1, 2]
    assert all(before - 1 <= e["at"] <= time.time() + 1 for e in events)
    assert list(events[0]) == sorted(events[0])  # stable field order


def test_secret_looking_fields_are_dropped(caplog):
    log_call({"event": "extract", "password": "hunter2", "api_key_hint": "x", "client": "c1"})
    flush_call_log()
    [line] = _lines(caplog)
    assert "hunter2" not in line and "api_key" not in line and '"client":"c1"' in line


def test_the_queue_is_bounded_and_says_what_it_dropped(caplog, monkeypatch):
    monkeypatch.setattr(bootstrap.call_log(), "max_queued", 2)
    for n in range(5):
        log_call({"event": "extract", "returned": n})
    flush_call_log()
    assert len(_lines(caplog)) == 2
    assert any("3 calls dropped" in r.getMessage() for r in caplog.records)


def test_the_writer_thread_flushes_without_being_asked(caplog):
    log_call({"event": "extract", "returned": 7})
    deadline = time.monotonic() + 5
    while not _lines(caplog) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _lines(caplog) and '"returned":7' in _lines(caplog)[0]


def test_a_flush_returns_after_the_batch_the_writer_thread_is_writing(caplog, monkeypatch):
    """flush_call_log() means every event queued before it is written, also one the writer
    thread has already taken (a test or a command reads the log right after)."""
    writing, release = threading.Event(), threading.Event()
    info = call_log.logger.info

    def slow_in_the_writer(*args, **kwargs):
        if threading.current_thread().name == "call log-writer":
            writing.set()
            release.wait(5)
        info(*args, **kwargs)

    monkeypatch.setattr(call_log.logger, "info", slow_in_the_writer)
    log_call({"event": "extract", "returned": 3})
    assert writing.wait(5), "the writer thread did not take the event"
    flushed = threading.Event()
    flusher = threading.Thread(target=lambda: (flush_call_log(), flushed.set()))
    flusher.start()
    assert not flushed.wait(0.3), "flush_call_log returned while the batch was still unwritten"
    release.set()
    flusher.join(5)
    assert flushed.is_set()
    assert [line for line in _lines(caplog) if '"returned":3' in line]


def test_nothing_queued_is_lost_at_a_normal_exit():
    result = run_python(
        "-c",
        "import logging; logging.basicConfig(level=logging.INFO); "
        "from pool_admin.api.call_log import log_call; "
        "[log_call({'event': 'extract', 'returned': n}) for n in range(3)]",
    )
    assert result.returncode == 0, result.stderr
    assert len(call_lines(result.stderr.split("INFO:pool_admin.calls:"))) == 3


def test_no_lines_when_the_call_logger_is_off(caplog):
    caplog.set_level(logging.WARNING, logger="pool_admin.calls")
    log_call({"event": "extract"})
    caplog.set_level(logging.INFO, logger="pool_admin.calls")
    flush_call_log()
    assert _lines(caplog) == []


def test_nothing_queued_is_lost_when_a_worker_process_ends():
    """The web server's workers are multiprocessing children: no atexit hooks run there."""
    result = run_python(
        "-c",
        "import logging, multiprocessing\n"
        "def work():\n"
        "    logging.basicConfig(level=logging.INFO)\n"
        "    from pool_admin.api.call_log import log_call\n"
        "    for n in range(3):\n"
        "        log_call({'event': 'extract', 'returned': n})\n"
        "if __name__ == '__main__':\n"
        "    child = multiprocessing.get_context('fork').Process(target=work)\n"
        "    child.start()\n"
        "    child.join()\n"
        "    assert child.exitcode == 0\n",
    )
    assert result.returncode == 0, result.stderr
    assert len(call_lines(result.stderr.split("INFO:pool_admin.calls:"))) == 3
