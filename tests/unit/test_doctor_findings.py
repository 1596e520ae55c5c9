"""The doctor's runner and printing (pool_admin/doctor/findings.py): every check bounded in time,
one line each, a failed store's dependants not checked, no password printed."""

from __future__ import annotations

import json
import threading
import time

from pool_admin.doctor.findings import (
    Check,
    Status,
    exit_code,
    fail,
    ok,
    render_json,
    render_text,
    run_checks,
    settings_refused,
    warn,
)


def test_a_check_that_does_not_return_in_time_fails_and_the_run_ends_at_the_deadline():
    release = threading.Event()

    def stuck():
        release.wait(30)
        return [ok("stuck", "never")]

    checks = [
        Check("stuck", stuck, "look at it"),
        Check("quick", lambda: [ok("quick", "fine")], "nothing"),
    ]
    began = time.monotonic()
    findings = run_checks(checks, timeout=0.5)
    took = time.monotonic() - began
    release.set()
    assert 0.5 <= took < 2.0
    assert [(f.name, f.status) for f in findings] == [
        ("stuck", Status.FAIL),
        ("quick", Status.OK),
    ]
    assert findings[0].summary == "no answer in 0.5 s"
    assert findings[0].fix == "look at it"


def test_checks_run_side_by_side_so_the_run_costs_the_slowest_one():
    def slow(name):
        return lambda: time.sleep(0.4) or [ok(name, "slept")]

    began = time.monotonic()
    findings = run_checks([Check(f"c{i}", slow(f"c{i}"), "") for i in range(5)], timeout=5)
    assert time.monotonic() - began < 1.5  # 5 x 0.4 s one after another would be 2 s
    assert all(f.status is Status.OK for f in findings)


def test_a_raising_check_fails_with_its_class_and_message_and_no_password():
    def broken():
        raise ConnectionError("cannot reach redis://:hunter2@db.example:6379/0")

    (finding,) = run_checks([Check("redis:pool", broken, "start it")], timeout=2)
    assert finding.status is Status.FAIL
    assert finding.summary.startswith("ConnectionError: cannot reach redis://")
    assert "hunter2" not in finding.summary
    assert finding.fix == "start it"


def test_a_check_whose_store_failed_is_not_run_and_says_which_failed():
    ran = []

    def dependant():
        ran.append(True)
        return [ok("celery", "fine")]

    checks = [
        Check("redis:broker", lambda: [fail("redis:broker", "refused", "start it")], ""),
        Check("celery", dependant, "", needs=("redis:broker",)),
        Check("beat", lambda: [ok("beat", "fine")], ""),
    ]
    findings = run_checks(checks, timeout=2)
    assert [(f.name, f.status) for f in findings] == [
        ("redis:broker", Status.FAIL),
        ("celery", Status.SKIP),
        ("beat", Status.OK),
    ]
    assert findings[1].summary == "not checked: redis:broker failed"
    assert ran == []
    assert exit_code(findings) == 1


def test_a_dependant_of_a_store_that_passed_runs():
    checks = [
        Check("redis:broker", lambda: [warn("redis:broker", "old", "upgrade")], ""),
        Check("celery", lambda: [ok("celery:fetches", "1 worker")], "", needs=("redis:broker",)),
    ]
    assert [f.status for f in run_checks(checks, timeout=2)] == [Status.WARN, Status.OK]


def test_warnings_pass_unless_strict():
    findings = [ok("a", "fine"), warn("b", "meh", "do this")]
    assert exit_code(findings) == 0
    assert exit_code(findings, strict=True) == 1
    assert exit_code([ok("a", "fine")], strict=True) == 0


def test_text_is_one_line_per_finding_with_the_fix_only_when_something_is_wrong():
    findings = [
        ok("postgres", "PostgreSQL 15, migrated"),
        fail("redis:pool", "refused\nover two lines", "start it"),
    ]
    findings = run_checks([Check(f.name, lambda f=f: [f], "") for f in findings], 2)
    text = render_text(findings, 0.25)
    lines = text.splitlines()
    assert lines[0] == "ok    postgres    PostgreSQL 15, migrated"
    assert lines[1] == "FAIL  redis:pool  refused over two lines -> start it"
    assert lines[2] == "doctor: 1 failing, 0 warning, 1 ok, 0 not checked (0.2 s)"


def test_json_has_every_finding_and_the_verdict():
    findings = [ok("postgres", "fine"), warn("alerts", "1 open", "see them")]
    document = json.loads(render_json(findings, 1.5))
    assert document["ok"] is True
    assert document["elapsed_ms"] == 1500
    assert [c["status"] for c in document["checks"]] == ["ok", "warn"]
    assert document["checks"][1]["fix"] == "see them"
    assert json.loads(render_json(findings, 1.5, strict=True))["ok"] is False


def test_settings_that_refuse_to_load_are_one_failing_config_line():
    text = settings_refused("POOL_SECRET_KEY must be urlsafe base64 of 32 bytes", as_json=False)
    assert text.splitlines()[0].startswith("FAIL  config  the settings refuse to start: POOL_")
    assert json.loads(settings_refused("x", as_json=True))["ok"] is False
