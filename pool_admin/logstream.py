"""The log handler of the project's processes: standard error as it is when a record is written.

``logging.StreamHandler`` keeps the stream it was configured with. Django configures logging
again on every ``django.setup()`` (each management command run in-process does), so a handler
configured while ``sys.stderr`` was a stand-in (a test's captured output) kept writing to it
after it was closed: the usage writer thread then failed on every batch, and logging printed each
failure's traceback from that thread. Python 3.11 before 3.11.8 shares one AST recursion counter
between threads (CPython gh-106905), so such a traceback, formatted while the main thread parsed
source (as Hypothesis does), made that parse fail with "AST constructor recursion depth mismatch".
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO


class CurrentStderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A ``StreamHandler`` on whatever ``sys.stderr`` is at the moment of each record."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        """The stream is always the current standard error; one given is ignored."""


class CurrentStdoutHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A ``StreamHandler`` on whatever ``sys.stdout`` is at the moment of each record (the
    access log's lines, as granian wrote its own)."""

    @property
    def stream(self) -> TextIO:
        return sys.stdout

    @stream.setter
    def stream(self, value: TextIO) -> None:
        """The stream is always the current standard output; one given is ignored."""
