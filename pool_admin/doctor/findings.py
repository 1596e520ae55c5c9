"""What a doctor's check finds, how checks run under a time bound, and how findings print.

No Django import: ``manage.py`` prints a settings refusal through ``render`` before Django can
start (``settings_refused``).

A check is a function returning one or more ``Finding``s (one line each). Each runs on a thread
of its own and is given ``timeout`` seconds: one that has not returned by then is a failure
("no answer in N s"), and the doctor goes on without it (the thread is a daemon: a check
stuck on a dead socket never holds the exit). An exception is a failure naming its class and
its message with any URL's password taken out.
"""

from __future__ import annotations

import enum
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from activity.redact import redact_text


class Status(enum.StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    #: Not judged: a store it reads through failed its own check (that one says why).
    SKIP = "skip"


@dataclass(frozen=True)
class Finding:
    #: The check's name, and the part it looks at after a colon (``redis:pool``).
    name: str
    status: Status
    #: What was found, in one line.
    summary: str
    #: What to do about it (empty when all is well).
    fix: str = ""
    elapsed_ms: int = 0


def ok(name: str, summary: str) -> Finding:
    return Finding(name, Status.OK, summary)


def warn(name: str, summary: str, fix: str) -> Finding:
    return Finding(name, Status.WARN, summary, fix)


def fail(name: str, summary: str, fix: str) -> Finding:
    return Finding(name, Status.FAIL, summary, fix)


def one_line(text: str, limit: int = 300) -> str:
    """``text`` on one line, at most ``limit`` characters, any URL's password taken out."""
    flat = " ".join(redact_text(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def error_summary(exc: BaseException) -> str:
    message = one_line(str(exc), 200)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


@dataclass(frozen=True)
class Check:
    #: The name its failure is reported under when it raises or runs out of time.
    name: str
    run: Callable[[], Sequence[Finding]]
    #: What to do when it raises or runs out of time.
    fix: str
    #: Checks whose failure leaves nothing to judge here (its findings are then one "skip").
    needs: tuple[str, ...] = ()


def run_checks(checks: Sequence[Check], timeout: float) -> list[Finding]:
    """Every check at once, each on its own thread; the findings in the checks' order.

    The whole run takes at most ``timeout`` seconds (plus thread start-up): the checks wait on
    different servers, so running them side by side costs the slowest one, not their sum. A
    check with ``needs`` first waits for those; if one of them failed it is not run (a Celery
    ping on a dead broker would only retry until the deadline).
    """
    runs = {check.name: _Run(check) for check in checks}
    deadline = time.monotonic() + timeout
    for run in runs.values():
        needs = [runs[name] for name in run.check.needs]
        thread = threading.Thread(
            target=run.execute, args=(needs, deadline), name=f"doctor-{run.check.name}"
        )
        thread.daemon = True  # one stuck on a dead socket never holds the exit
        thread.start()
    findings: list[Finding] = []
    for run in runs.values():
        run.done.wait(max(0.0, deadline - time.monotonic()))
        found = run.findings
        if found is None:
            found = [fail(run.check.name, f"no answer in {timeout:g} s", run.check.fix)]
        findings.extend(found)
    return findings


class _Run:
    """One check's run: its findings once done (None until then)."""

    def __init__(self, check: Check) -> None:
        self.check = check
        self.findings: list[Finding] | None = None
        self.done = threading.Event()

    @property
    def failed(self) -> bool:
        return self.findings is None or any(f.status is Status.FAIL for f in self.findings)

    def execute(self, needs: Sequence[_Run], deadline: float) -> None:
        for need in needs:
            need.done.wait(max(0.0, deadline - time.monotonic()))
        broken = [need.check.name for need in needs if need.failed]
        if broken:
            skipped = f"not checked: {', '.join(broken)} failed"
            self.findings = [Finding(self.check.name, Status.SKIP, skipped)]
            self.done.set()
            return
        began = time.monotonic()
        try:
            found = list(self.check.run())
        except Exception as exc:  # any failure of a check is its finding
            found = [fail(self.check.name, error_summary(exc), self.check.fix)]
        elapsed = int((time.monotonic() - began) * 1000)
        self.findings = [
            Finding(f.name, f.status, one_line(f.summary), one_line(f.fix), elapsed) for f in found
        ]
        self.done.set()


def exit_code(findings: Sequence[Finding], strict: bool = False) -> int:
    """0 when nothing failed (and, with ``strict``, nothing warned); else 1."""
    bad = {Status.FAIL, Status.WARN} if strict else {Status.FAIL}
    return 1 if any(f.status in bad for f in findings) else 0


LABELS = {Status.OK: "ok", Status.WARN: "WARN", Status.FAIL: "FAIL", Status.SKIP: "--"}


def render_text(findings: Sequence[Finding], elapsed_s: float) -> str:
    """One line per finding (status, name, summary, then what to do), and a total line."""
    width = max((len(f.name) for f in findings), default=0)
    lines = []
    for f in findings:
        line = f"{LABELS[f.status]:<4}  {f.name:<{width}}  {f.summary}"
        if f.fix and f.status in (Status.WARN, Status.FAIL):
            line += f" -> {f.fix}"
        lines.append(line)
    counts = {status: sum(f.status is status for f in findings) for status in Status}
    lines.append(
        f"doctor: {counts[Status.FAIL]} failing, {counts[Status.WARN]} warning, "
        f"{counts[Status.OK]} ok, {counts[Status.SKIP]} not checked ({elapsed_s:.1f} s)"
    )
    return "\n".join(lines)


def render_json(findings: Sequence[Finding], elapsed_s: float, strict: bool = False) -> str:
    return json.dumps(
        {
            "ok": exit_code(findings, strict) == 0,
            "elapsed_ms": int(elapsed_s * 1000),
            "checks": [{**asdict(f), "status": f.status.value} for f in findings],
        },
        indent=2,
    )


def settings_refused(reason: str, as_json: bool) -> str:
    """The doctor's report when the settings themselves refuse to load: one failing check."""
    finding = fail(
        "config",
        f"the settings refuse to start: {one_line(reason)}",
        "set the variable as the README's Configuration says",
    )
    return render_json([finding], 0.0) if as_json else render_text([finding], 0.0)
