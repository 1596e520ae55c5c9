"""The pool's Lua operations: its function library (``lua/lib/<part>.lua`` joined in
``LIB_PARTS`` order, then each ``lua/<name>.lua`` wrapped as one function), loaded and called
through ``activity.lua_functions``, the loader the scheduler's library uses too.
"""

from __future__ import annotations

from activity.lua_functions import LUA_DIR, FunctionLibrary

LIB_DIR = LUA_DIR / "lib"

# The library's parts, in the order they are joined. A Lua local is visible only below its
# declaration, so each part comes after every part it uses; a part out of order compiles but
# fails when a function calls a name that is not declared yet. `core` first: its buffer is the
# only way to a hash or sorted set (tests/activity/test_lua_rules.py).
LIB_PARTS = (
    "core",
    "keys",
    "replies",
    "records",
    "sessions_slots",
    "ownership_drain",
    "sweep",
    "outcomes_quarantine",
    "upsert_health",
    "extract_quota",
)

SCRIPT_NAMES = (
    "upsert",
    "apply_health",
    "inventory",
    "extract",
    "assign",
    "renew",
    "begin_drain",
    "acknowledge_drain",
    "expire",
    "open_session",
    "issue_snapshot",
    "acknowledge_snapshot",
    "write_report",
    "read_runtime",
    "worker_assignments",
    "worker_revision",
    "assignable",
    "drain_tickets",
    "upstream_inventory",
    "extractable",
    "sweep",
    "report_outcome",
    "quarantine_of",
    "charge_call",
    "take_due_checks",
    "browse",
    "proxy_detail",
    "worker_sessions",
)


def lib_source() -> str:
    """The shared part of the library: its parts joined in ``LIB_PARTS`` order, as Lua text."""
    return "\n".join((LIB_DIR / f"{part}.lua").read_text() for part in LIB_PARTS)


def script_source(name: str) -> str:
    """The shared library and one operation's body, as Lua text (for tests and readers)."""
    return lib_source() + "\n" + (LUA_DIR / f"{name}.lua").read_text()


_WRAPPER = (
    "redis.register_function('{name}_{suffix}', function(KEYS, ARGV)\n"
    "  local layout_error = bind(KEYS[1])\n"
    "  if layout_error then return fail(layout_error) end\n"
    "  local reply = (function()\n{body}\n  end)()\n"
    "  flush_writes()\n"
    "  flush_counts()\n"
    "  return reply\n"
    "end)\n"
)


#: The pool's library: lua/lib/ in LIB_PARTS order, then lua/<name>.lua for each operation.
POOL_LIBRARY = FunctionLibrary(
    prefix="pp_activity",
    shared=tuple(LIB_DIR / f"{part}.lua" for part in LIB_PARTS),
    operations=tuple((name, LUA_DIR / f"{name}.lua") for name in SCRIPT_NAMES),
    wrapper=_WRAPPER,
)
