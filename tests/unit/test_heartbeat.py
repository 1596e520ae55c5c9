"""The heartbeat task's logic, called as a plain function."""

from datetime import UTC, datetime, timedelta, timezone

from pool_admin.tasks import heartbeat


def test_heartbeat_returns_utc_iso_timestamp(caplog):
    fixed = datetime(2026, 1, 2, 5, 4, 5, tzinfo=timezone(timedelta(hours=2)))
    with caplog.at_level("INFO", logger="pool_admin.tasks"):
        stamp = heartbeat(now=lambda: fixed)
    assert stamp == "2026-01-02T03:04:05+00:00"
    assert caplog.messages == [f"heartbeat {stamp}"]


def test_heartbeat_default_clock_is_now():
    before = datetime.now(UTC)
    stamp = datetime.fromisoformat(heartbeat())
    assert before <= stamp <= datetime.now(UTC)
