"""Reading what an operator command printed, for the command tests (which run it with the
``run`` fixture of this folder's conftest.py, as from the command line)."""

from __future__ import annotations

import json

from pool_admin.api.call_log import call_lines


def assert_refused(result: tuple[int, str, str], *words: str) -> None:
    code, out, err = result
    assert code == 1, (out, err)
    # Log records (e.g. the call log line) also go to stderr; the reason is one CommandError line.
    lines = [line for line in err.strip().splitlines() if " pool_admin." not in line]
    assert len(lines) == 1, err
    assert lines[0].startswith("CommandError: ")
    for word in words:
        assert word in lines[0]


def logged_calls(err: str) -> list[dict]:
    """The calls a command logged (to stderr, as ``... pool_admin.calls: call {json}``
    lines)."""
    lines = call_lines(err.split("pool_admin.calls: "))
    return [json.loads(line.removeprefix("call ")) for line in lines]


def plaintext_in(out: str, scheme: str = "pp") -> str:
    keys = [line for line in out.splitlines() if line.startswith(f"{scheme}_") and " " not in line]
    assert len(keys) == 1, out
    return keys[0]
