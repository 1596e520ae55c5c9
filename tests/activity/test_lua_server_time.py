"""The pool's Lua reads the server's clock only as "now", in one place.

Valkey (8.0 and later) freezes ``TIME`` for a script's whole run, where Redis 7.0 lets it move:
code that waited on ``TIME`` inside a script would never end on Valkey. Reading it once per
call as "now" means the same on both, so that is the only use allowed.
"""

from __future__ import annotations

import re

from activity.redis._scripts import LUA_DIR

_TIME_CALL = re.compile(r"redis\.p?call\(\s*['\"]TIME['\"]", re.I)


def _lua_sources() -> dict[str, str]:
    return {str(p.relative_to(LUA_DIR)): p.read_text() for p in sorted(LUA_DIR.rglob("*.lua"))}


def test_time_is_read_only_by_server_ms():
    calls = [
        (name, text[: m.start()].count("\n") + 1)
        for name, text in _lua_sources().items()
        for m in _TIME_CALL.finditer(text)
    ]
    assert len(calls) == 1, f"TIME is read in {calls}; read it through server_ms() only"
    name, line = calls[0]
    text = _lua_sources()[name].splitlines()
    function = next(t for t in reversed(text[:line]) if "function" in t)
    assert re.search(r"function server_ms\(\)", function), (name, line, function)


def test_no_script_waits_on_the_server_clock():
    """``server_ms()`` is never read in a loop's condition (a wait that never ends on Valkey)."""
    loop_on_time = re.compile(r"\b(while|until)\b[^\n]*server_ms\(\)")
    offenders = [name for name, text in _lua_sources().items() if loop_on_time.search(text)]
    assert offenders == []
