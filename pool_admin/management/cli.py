"""Shared by the operator commands: their base class, strict numbers, one-line errors, tables."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

import redis
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from activity.errors import ActivityError


class OneLineParser(CommandParser):
    """A ``CommandParser`` whose argument errors on the command line are one line and status 1.

    argparse would print the whole usage block and exit with 2; an operator command promises one
    line (docs/OPERATIONS.md, Operator commands). From ``call_command`` an error is still
    Django's ``CommandError("Error: ...")``. ``--help`` and ``--version`` are unchanged.
    """

    def error(self, message: str) -> NoReturn:
        if not self.called_from_command_line:
            super().error(message)  # raises CommandError
        reason = " ".join(message.splitlines())  # an argument may hold a line break
        self.exit(1, f"CommandError: {self.prog}: {reason} (see --help); nothing changed\n")


def _one_line(parser: argparse.ArgumentParser) -> None:
    """Make ``parser`` and its subparsers (e.g. api_key's actions) ``OneLineParser``s."""
    if isinstance(parser, OneLineParser):
        return  # an alias of a subparser already done
    if type(parser) is not CommandParser:
        raise TypeError(f"expected Django's CommandParser, got {type(parser).__name__}")
    parser.__class__ = OneLineParser  # it adds no state, only error()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for subparser in action.choices.values():
                _one_line(subparser)


class OperatorCommand(BaseCommand):
    """The base of every project command: argument errors as one line (``OneLineParser``)."""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        # Django builds a CommandParser and runs add_arguments() on it, so subparsers already
        # exist (CommandParser, with called_from_command_line passed on) when it returns.
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        _one_line(parser)
        return parser


def parse_int(text: str | int | None, option: str, low: int, high: int) -> int | None:
    """``text`` as an int in ``[low, high]``, or a one-line ``CommandError`` naming ``option``."""
    if text is None:
        return None
    try:
        value = int(str(text).strip(), 10)
    except ValueError:
        raise CommandError(f"{option} must be a whole number, got {str(text)!r}") from None
    if not low <= value <= high:
        raise CommandError(f"{option} must be between {low} and {high}, got {value}")
    return value


def validation_text(exc: ValidationError) -> str:
    """A ValidationError as one line: ``field: message; field: message``."""
    if hasattr(exc, "error_dict"):
        parts = [f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items()]
        return "; ".join(parts)
    return " ".join(exc.messages)


@contextmanager
def one_line_errors(nothing_changed: bool = True) -> Iterator[None]:
    """Turn database, validation, Redis and pool errors into a one-line ``CommandError``."""
    tail = "; nothing changed" if nothing_changed else ""
    try:
        yield
    except ValidationError as exc:
        raise CommandError(f"invalid: {validation_text(exc)}{tail}") from None
    except DatabaseError as exc:
        # No SQL or parameters: they may hold values an operator should not see in a log.
        raise CommandError(f"database error: {type(exc).__name__}{tail}") from None
    except redis.RedisError as exc:
        raise CommandError(f"store_unavailable: Redis error {type(exc).__name__}{tail}") from None
    except ActivityError as exc:
        raise CommandError(f"{exc.code}: {exc}{tail}") from None


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain left-aligned text table ("-" for None)."""
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out.extend(line(row) for row in cells)
    return "\n".join(out)


def add_secrets_fd(parser: CommandParser) -> None:
    """``--secrets-fd FD``: a generated secret goes to that open descriptor, not to stdout
    (``make run`` reads it from a pipe and shows it on the terminal only, never in a log)."""
    parser.add_argument(
        "--secrets-fd",
        type=int,
        default=None,
        metavar="FD",
        help="write a generated secret to this open file descriptor as one NAME=VALUE line "
        "instead of printing it",
    )


def checked_secrets_fd(value: object) -> int | None:
    """``--secrets-fd``'s value, checked to be an open descriptor before anything changes."""
    if value is None:
        return None
    fd = int(str(value))
    try:
        os.fstat(fd)
    except (OSError, OverflowError):
        raise CommandError(f"--secrets-fd {fd} is not an open file descriptor") from None
    return fd


def hand_over_secret(fd: int, name: str, value: str) -> None:
    """One ``NAME=VALUE`` line on ``fd`` (left open: the caller owns it)."""
    data = f"{name}={value}\n".encode()
    while data:  # a pipe may take a write in parts
        data = data[os.write(fd, data) :]
