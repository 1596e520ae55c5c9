"""``make run``'s log files: one per child under ``$RUN_DIR/logs/``, and what reaches the terminal.

Each child's stdout and stderr go to its own file, opened here (mode 0600) and handed to the
child as a descriptor, so a child running as another user needs no access to ``RUN_DIR``. A
file is appended to across runs, each run starting with a header line; its growth is bounded by
``LOG_MAX_BYTES``: past it (checked at start and every ``ROTATE_CHECK_S`` while running) the
file is copied to ``<name>.log.1`` (replacing the previous copy) and truncated in place. The
children write with O_APPEND, so they go on at the new end; the lines written between the
copy and the truncation are lost, a few at most. So a log holds at most about twice the
limit on disk.

The terminal gets only a child's WARNING, ERROR and CRITICAL lines and tracebacks, read from
its file at most ``READ_BYTES_PER_TICK`` per tick and at most ``ECHO_LINES_PER_WINDOW`` lines
per ``ECHO_WINDOW_S``; past that the launcher says how many it left out. No Django import.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from activity.redact import redact_text

#: Size past which a log is copied to ``.1`` and truncated (at start and while running).
LOG_MAX_BYTES = 10 * 1024 * 1024
#: How often a running child's log is checked against ``LOG_MAX_BYTES``.
ROTATE_CHECK_S = 30.0
#: Bytes read from one log per tick (0.2 s): a child writing faster is read later, not all at
#: once, so one chatty child cannot stall the launcher.
READ_BYTES_PER_TICK = 64 * 1024
#: A longer line is cut here (the rest of it is read as further lines, never echoed alone).
MAX_LINE = 4096
#: Lines echoed per child per window; the rest are counted and the count said.
ECHO_LINES_PER_WINDOW = 30
ECHO_WINDOW_S = 30.0
#: What a failed setup step's log tail shows: its last lines, from at most this many bytes.
TAIL_LINES = 30
TAIL_BYTES = 8192

# A log level as our children write it: Django's and the gateway's "... WARNING name: ...",
# Celery's "[...: WARNING/MainProcess]", granian's "[WARNING]". The first level word near the
# start of a line is its level, so an INFO message mentioning "ERROR:" is not taken.
_LEVEL = re.compile(r"(?:^|[\s\[])(DEBUG|INFO|WARNING|ERROR|CRITICAL|FATAL)(?=[\s/\]:])")
_LEVEL_SPAN = 80
_NOTABLE_LEVELS = frozenset({"WARNING", "ERROR", "CRITICAL", "FATAL"})
_CHAINED = ("During handling of the above exception", "The above exception was the direct")


def log_name(child: str) -> str:
    """``"web (granian)"`` -> ``"web"``, ``"fetch worker"`` -> ``"fetch-worker"``."""
    return re.sub(r"\W+", "-", child.split(" (")[0]).strip("-").lower()


def rotate_if_over(path: Path, limit: int | None = None) -> bool:
    """Copy ``path`` to ``<path>.1`` and truncate it when it is over ``limit`` bytes (default
    ``LOG_MAX_BYTES``)."""
    limit = LOG_MAX_BYTES if limit is None else limit
    try:
        if path.stat().st_size <= limit:
            return False
    except FileNotFoundError:
        return False
    previous = path.with_name(path.name + ".1")
    # Made 0600 before a byte is copied: the log's own mode, whatever the directory's.
    fd = os.open(previous, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an older copy made with another mode
    with os.fdopen(fd, "wb") as out, path.open("rb") as source:
        shutil.copyfileobj(source, out)
    os.truncate(path, 0)
    return True


def open_log(path: Path, what: str) -> BinaryIO:
    """``path`` opened for appending (created 0600), rotated first if over the limit, with a
    header line that starts this run's part."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    rotate_if_over(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    log = os.fdopen(fd, "ab")
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    log.write(f"==== {stamp} make run: {what} (launcher pid {os.getpid()})\n".encode())
    log.flush()
    return log


def tail(path: Path, lines: int = TAIL_LINES, max_bytes: int = TAIL_BYTES) -> list[str]:
    """The last ``lines`` lines of ``path``, read from at most its last ``max_bytes``."""
    try:
        with path.open("rb") as file:
            file.seek(max(0, file.seek(0, os.SEEK_END) - max_bytes))
            data = file.read(max_bytes)
    except OSError:
        return []
    return [line[:MAX_LINE] for line in data.decode(errors="replace").splitlines()[-lines:]]


def is_notable(line: str) -> bool:
    """True for a line logged at WARNING or above."""
    found = _LEVEL.search(line[:_LEVEL_SPAN])
    return found is not None and found.group(1) in _NOTABLE_LEVELS


class NotableLines:
    """Picks from a child's lines those worth the terminal: a WARNING/ERROR/CRITICAL line,
    the indented lines continuing it, and a traceback from its first line to its last."""

    def __init__(self) -> None:
        self._in_traceback = False
        self._continuing = False

    def __call__(self, line: str) -> bool:
        if line.startswith("Traceback (most recent call last)"):
            self._in_traceback = True
            return True
        if self._in_traceback:
            if line[:1].isspace() or line.startswith(_CHAINED):
                return True
            self._in_traceback = False  # the exception's own line ends it
            self._continuing = False
            return True
        if self._continuing and line[:1].isspace() and line.strip():
            return True
        self._continuing = is_notable(line)
        return self._continuing


class LogTail:
    """Reads the lines a child appends to its log, a bounded amount per call."""

    def __init__(self, path: Path, start: int) -> None:
        self.path = path
        self._file = path.open("rb")
        self._file.seek(start)
        self._partial = b""

    def read_lines(self) -> list[str]:
        if os.fstat(self._file.fileno()).st_size < self._file.tell():
            self._file.seek(0)  # rotated (truncated in place): read on from its start
            self._partial = b""
        data = self._partial + self._file.read(READ_BYTES_PER_TICK)
        lines = data.split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > MAX_LINE:
            lines.append(self._partial)
            self._partial = b""
        return [line[:MAX_LINE].decode(errors="replace").rstrip("\r") for line in lines]

    def close(self) -> None:
        self._file.close()


class Echo:
    """One child's notable lines to the terminal, prefixed with its name, at most
    ``ECHO_LINES_PER_WINDOW`` per ``ECHO_WINDOW_S``; the ones left out are counted and said."""

    def __init__(
        self,
        name: str,
        tail: LogTail,
        write: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self._tail = tail
        self._write = write
        self._clock = clock
        self._pick = NotableLines()
        self._window_start = clock()
        self._shown = 0
        self._left_out = 0
        self._last_rotate_check = clock()

    def pump(self) -> None:
        now = self._clock()
        if now - self._window_start >= ECHO_WINDOW_S:
            self._say_left_out(now)
        if now - self._last_rotate_check >= ROTATE_CHECK_S:
            self._last_rotate_check = now
            rotate_if_over(self._tail.path)
        for line in self._tail.read_lines():
            if not self._pick(line):
                continue
            if self._shown < ECHO_LINES_PER_WINDOW:
                self._shown += 1
                self._write(f"{self.name}: {redact_text(line)}")
            else:
                self._left_out += 1

    def finish(self) -> None:
        """Echo what is left in the log (bounded as ever), say any count left out, close."""
        self.pump()
        self._say_left_out(self._clock())
        self._tail.close()

    def _say_left_out(self, now: float) -> None:
        if self._left_out:
            self._write(
                f"launcher: {self.name}: {self._left_out} more warning/error lines in the last "
                f"{now - self._window_start:.0f} s not shown; see {self._tail.path}"
            )
        self._window_start, self._shown, self._left_out = now, 0, 0
