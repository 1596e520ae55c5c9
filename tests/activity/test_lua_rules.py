"""Two rules every Lua file keeps, read from the Lua itself (a real parser: comments and strings
are not code).

The write buffer: every operation reads and writes hashes and sorted sets through
lua/lib/core.lua's buffer (hget, prefetch, hset, hdel, hexists, zadd, zrem, zread) and counters
(bump, counter). A `redis.call` on a hash or sorted set anywhere else reads past the call's
buffered writes (an HGET that misses an hset made earlier in the same call) or writes under
them (the flush at the end overwrites it). Nothing at run time notices: the reply is merely
wrong now and then. So every Lua file but core.lua fails here on a `redis.call`/`redis.pcall`
whose command is a hash or sorted-set command, in any case, or whose command cannot be read
(not a string literal, `redis.call` taken as a value, `redis` itself aliased). Key-level
commands (EXISTS, PTTL, PEXPIRE, DEL) are not in the rule: `extend`, the one that needs it,
flushes first.

`TIME` only as "now": Valkey freezes `TIME` for a script's whole run, so an operation that
waited or measured with it would hang or mismeasure there. It is read in one place, core.lua's
`server_ms`, called at most once per operation and never in a loop.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from luaparser import ast, astnodes

from activity.redis._scripts import LIB_DIR, LIB_PARTS, LUA_DIR

# Redis's @hash and @sortedset ACL categories (7.0 to 8.x, and Valkey's), in upper case;
# test_the_command_list_covers_the_servers_categories holds it against the running server.
_HASH = """HDEL HEXISTS HEXPIRE HEXPIREAT HEXPIRETIME HGET HGETALL HGETDEL HGETEX HINCRBY
    HINCRBYFLOAT HKEYS HLEN HMGET HMSET HPERSIST HPEXPIRE HPEXPIREAT HPEXPIRETIME HPTTL
    HRANDFIELD HSCAN HSET HSETEX HSETNX HSTRLEN HTTL HVALS"""
HASH_COMMANDS = frozenset(_HASH.split())
_SORTED_SET = """BZMPOP BZPOPMAX BZPOPMIN SORT SORT_RO ZADD ZCARD ZCOUNT ZDIFF ZDIFFSTORE ZINCRBY
    ZINTER ZINTERCARD ZINTERSTORE ZLEXCOUNT ZMPOP ZMSCORE ZPOPMAX ZPOPMIN ZRANDMEMBER ZRANGE
    ZRANGEBYLEX ZRANGEBYSCORE ZRANGESTORE ZRANK ZREM ZREMRANGEBYLEX ZREMRANGEBYRANK
    ZREMRANGEBYSCORE ZREVRANGE ZREVRANGEBYLEX ZREVRANGEBYSCORE ZREVRANK ZSCAN ZSCORE ZUNION
    ZUNIONSTORE"""
SORTED_SET_COMMANDS = frozenset(_SORTED_SET.split())
RULED = HASH_COMMANDS | SORTED_SET_COMMANDS
UNREADABLE = "?"  # the command of a call this test cannot read

CORE = LIB_DIR / "core.lua"

# The exceptions, each with why it cannot read past or write under the buffer. A key here is
# (file relative to lua/, enclosing function, command); every one must still be in the code.
ALLOWED = {
    ("lib/extract_quota.lua", "quota_take", "HMGET"): (
        "CallQuota counters: no buffer primitive ever touches a quota key, and a unit taken "
        "must stay taken whatever the call answers next (docs/activity-pool.md)"
    ),
    ("lib/extract_quota.lua", "quota_add", "HSET"): "the same counters, written at once",
}


@dataclass(frozen=True)
class DirectAccess:
    """One `redis.call`/`redis.pcall` that the rule forbids outside core.lua."""

    file: str
    function: str  # the enclosing named function ("" at a file's top level)
    line: int
    command: str  # upper case, or UNREADABLE

    def __str__(self) -> str:
        where = f" in {self.function}" if self.function else ""
        return f"lua/{self.file}:{self.line}{where}: redis.call {self.command}"


def _children(node: astnodes.Node) -> Iterator[astnodes.Node]:
    for name, value in vars(node).items():
        if name.startswith("_") or name == "comments":
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, astnodes.Node):
                yield item


@cache
def _tree(source: str) -> astnodes.Chunk:
    return ast.parse(source)


def _walk(
    node: astnodes.Node, ancestors: tuple[astnodes.Node, ...] = (), function: str = ""
) -> Iterator[tuple[astnodes.Node, tuple[astnodes.Node, ...], str]]:
    """Every node with its ancestors (nearest last) and the name of the function it is in."""
    yield node, ancestors, function
    if isinstance(node, (astnodes.LocalFunction, astnodes.Function)):
        function = ast.to_lua_source(node.name)
    for child in _children(node):
        yield from _walk(child, (*ancestors, node), function)


def _text(node: astnodes.Node) -> str | None:
    if isinstance(node, astnodes.String):
        return node.s.decode() if isinstance(node.s, bytes) else str(node.s)
    return None


def _is_redis(node: astnodes.Node) -> bool:
    return isinstance(node, astnodes.Name) and node.id == "redis"


def _is_redis_call(node: astnodes.Node) -> bool:
    """`redis.call`, `redis.pcall`, `redis['call']`, ..."""
    if not (isinstance(node, astnodes.Index) and _is_redis(node.value)):
        return False
    if isinstance(node.idx, astnodes.Name) and node.notation == astnodes.IndexNotation.DOT:
        name = node.idx.id
    else:
        name = _text(node.idx)
    return name in ("call", "pcall")


def _is_used_as_a_table(node: astnodes.Node, parent: astnodes.Node | None) -> bool:
    """`redis.x` or `redis:x(...)` (both looked at on their own), not `redis` passed around."""
    if isinstance(parent, astnodes.Index):
        return parent.value is node
    return isinstance(parent, astnodes.Invoke) and parent.source is node


def direct_accesses(source: str, file: str) -> list[DirectAccess]:
    """The hash and sorted-set commands `source` sends itself, and the calls it hides."""
    found: list[DirectAccess] = []

    def add(node: astnodes.Node, function: str, command: str) -> None:
        line = node.line if node.line is not None else 0
        found.append(DirectAccess(file, function, line, command))

    for node, ancestors, function in _walk(_tree(source)):
        parent = ancestors[-1] if ancestors else None
        if isinstance(node, astnodes.Call) and _is_redis_call(node.func):
            command = _text(node.args[0]) if node.args else None
            if command is None:
                add(node, function, UNREADABLE)
            elif command.strip().upper() in RULED:
                add(node, function, command.strip().upper())
        elif _is_redis_call(node) and not (
            isinstance(parent, astnodes.Call) and parent.func is node
        ):
            add(node, function, UNREADABLE)  # taken as a value: `local call = redis.call`
        elif isinstance(node, astnodes.Invoke) and _is_redis(node.source):
            add(node, function, UNREADABLE)  # redis:call(...)
        elif _is_redis(node) and not _is_used_as_a_table(node, parent):
            add(node, function, UNREADABLE)  # `local r = redis`: every use of it is hidden
    return found


def _lua_files() -> list[Path]:
    return sorted(LUA_DIR.glob("*.lua")) + sorted(LIB_DIR.glob("*.lua"))


def _ruled_files() -> list[Path]:
    return [f for f in _lua_files() if f != CORE]


@cache
def _accesses_in_the_code() -> tuple[DirectAccess, ...]:
    found: list[DirectAccess] = []
    for path in _ruled_files():
        found += direct_accesses(path.read_text(), path.relative_to(LUA_DIR).as_posix())
    return tuple(found)


def test_no_operation_reads_or_writes_a_hash_or_sorted_set_past_the_buffer():
    forbidden = [
        a for a in _accesses_in_the_code() if (a.file, a.function, a.command) not in ALLOWED
    ]
    assert not forbidden, "outside lua/lib/core.lua's primitives:\n" + "\n".join(
        map(str, forbidden)
    )


def test_every_allowed_exception_is_still_in_the_code():
    """An exception that the code no longer needs is removed, not kept as a free pass."""
    used = {(a.file, a.function, a.command) for a in _accesses_in_the_code()}
    assert set(ALLOWED) <= used, set(ALLOWED) - used


def test_the_rule_reads_every_file_of_the_library():
    """The rule covers every part; core.lua, the one it exempts, is one of them."""
    assert sorted(p.stem for p in LIB_DIR.glob("*.lua")) == sorted(LIB_PARTS)
    assert LIB_PARTS[0] == "core"
    assert len(_ruled_files()) == len(list(LUA_DIR.glob("*.lua"))) + len(LIB_PARTS) - 1


@pytest.mark.parametrize(
    ("code", "command"),
    [
        ("local v = redis.call('HGET', HOT, pid)", "HGET"),
        ('redis.pcall("zadd", AVAIL, 1, pid)', "ZADD"),
        ("redis.call([[hSet]], R, pid, raw)", "HSET"),
        ("local n = redis.call ( 'ZCard' , AVAIL )", "ZCARD"),
        ("redis['call']('HDEL', OWN, pid)", "HDEL"),
        ("redis.call('SORT_RO', AVAIL)", "SORT_RO"),
        ("local cmd = 'HGET'\nredis.call(cmd, HOT, pid)", UNREADABLE),
        ("local call = redis.call\ncall('HGET', HOT, pid)", UNREADABLE),
        ("local r = redis\nr.call('HGET', HOT, pid)", UNREADABLE),
        ("redis:call('HGET', HOT, pid)", UNREADABLE),
    ],
)
def test_a_planted_access_is_caught(code, command):
    found = direct_accesses(code, "planted.lua")
    assert [a.command for a in found] == [command], found


@pytest.mark.parametrize(
    "code",
    [
        "local t = redis.call('TIME')",
        "redis.call('SET', key, value, 'PX', ttl)",
        "if redis.call('EXISTS', QUAR) == 1 then end",
        "local s = 'redis.call(\"HGET\", k, f)'",
        "-- redis.call('HSET', k, f, v)\nlocal x = 1",
        "--[[ redis.call('ZADD', k, 1, m) ]]\nlocal x = 1",
        "local v = hget(HOT, pid)\nzadd(AVAIL, 1, pid)",
        "local d = redis.sha1hex(value)",
    ],
)
def test_what_the_rule_allows_is_not_caught(code):
    assert direct_accesses(code, "planted.lua") == []


def test_a_violation_planted_in_an_operation_is_caught():
    """The real extract.lua with one ZCARD sent past the buffer (its step 2 uses zread)."""
    source = (LUA_DIR / "extract.lua").read_text()
    planted = source.replace("zread('ZCARD', AVAIL)", "redis.call('zcard', AVAIL)")
    assert planted != source
    assert direct_accesses(source, "extract.lua") == []
    found = direct_accesses(planted, "extract.lua")
    assert [(a.command, a.function) for a in found] == [("ZCARD", "")]


def test_a_violation_planted_in_a_part_of_the_library_is_caught():
    """records.lua's get_rec reading `hot` itself instead of through hget, named by function."""
    source = (LIB_DIR / "records.lua").read_text()
    planted = source.replace(
        "local raw = hget(HOT, pid)", "local raw = redis.call('HGET', HOT, pid)"
    )
    assert planted != source
    found = direct_accesses(planted, "lib/records.lua")
    assert [(a.command, a.function) for a in found] == [("HGET", "get_rec")]


@pytest.mark.redis
def test_the_command_list_covers_the_servers_categories(redis_client):
    """Every hash and sorted-set command the server knows is in the rule's list."""
    known = {
        (c.decode() if isinstance(c, bytes) else c).upper()
        for category in ("hash", "sortedset")
        for c in redis_client.acl_cat(category)
    }
    assert known <= RULED, known - RULED


# ---------------------------------------------------------------------- TIME only as "now"
_LOOPS = (astnodes.While, astnodes.Repeat, astnodes.Fornum, astnodes.Forin)


@dataclass(frozen=True)
class ClockRead:
    """A `redis.call('TIME')` or a call of `server_ms`, and whether a loop repeats it."""

    file: str
    function: str
    what: str  # "TIME" or "server_ms"
    in_loop: bool


def clock_reads(source: str, file: str) -> list[ClockRead]:
    found = []
    for node, ancestors, function in _walk(_tree(source)):
        if not isinstance(node, astnodes.Call):
            continue
        in_loop = any(isinstance(a, _LOOPS) for a in ancestors)
        command = _text(node.args[0]) if node.args else None
        if _is_redis_call(node.func) and command is not None and command.upper() == "TIME":
            found.append(ClockRead(file, function, "TIME", in_loop))
        elif isinstance(node.func, astnodes.Name) and node.func.id == "server_ms":
            found.append(ClockRead(file, function, "server_ms", in_loop))
    return found


def _clock_reads_in_the_code() -> list[ClockRead]:
    found: list[ClockRead] = []
    for path in _lua_files():
        found += clock_reads(path.read_text(), path.relative_to(LUA_DIR).as_posix())
    return found


def test_time_is_read_only_as_now_once_per_operation():
    reads = _clock_reads_in_the_code()
    assert [r for r in reads if r.what == "TIME"] == [
        ClockRead("lib/core.lua", "server_ms", "TIME", in_loop=False)
    ]
    calls = [r for r in reads if r.what == "server_ms"]
    assert calls, "no operation reads the server's clock: this test reads the wrong names"
    assert [r for r in calls if r.in_loop or r.file.startswith("lib/")] == []
    per_file = Counter(r.file for r in calls)
    assert [f for f, n in per_file.items() if n > 1] == []


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (
            "local t0 = server_ms()\nwhile server_ms() - t0 < 10 do end",
            [("server_ms", False), ("server_ms", True)],
        ),
        (
            "repeat local t = redis.call('time') until t[2] == 0",
            [("TIME", True)],
        ),
        ("for i = 1, 3 do local snow = server_ms() end", [("server_ms", True)]),
        ("local snow = server_ms()\nfor i = 1, 3 do f(snow) end", [("server_ms", False)]),
    ],
)
def test_a_planted_clock_loop_is_seen(code, expected):
    assert [(r.what, r.in_loop) for r in clock_reads(code, "planted.lua")] == expected


# ---------------------------------------------------------------------- the parts' order
def _declared_at_top(chunk: astnodes.Chunk) -> set[str]:
    names: set[str] = set()
    for statement in chunk.body.body:
        if isinstance(statement, astnodes.LocalFunction):
            names.add(statement.name.id)
        elif isinstance(statement, astnodes.LocalAssign):
            names |= {t.id for t in statement.targets if isinstance(t, astnodes.Name)}
    return names


def _names_used(chunk: astnodes.Chunk) -> set[str]:
    """Every variable name the chunk mentions (not field names: `rec.s`, `{ok = 1}`)."""
    used: set[str] = set()
    for node, ancestors, _ in _walk(chunk):
        if not isinstance(node, astnodes.Name):
            continue
        parent = ancestors[-1] if ancestors else None
        field = (
            isinstance(parent, astnodes.Index)
            and parent.idx is node
            and parent.notation == astnodes.IndexNotation.DOT
        )
        key = (
            isinstance(parent, astnodes.Field)
            and parent.key is node
            and not parent.between_brackets
        )
        method = isinstance(parent, astnodes.Invoke) and parent.func is node
        if not (field or key or method):
            used.add(node.id)
    return used


def test_each_part_of_the_library_uses_only_what_the_parts_before_it_declare():
    """A part joined before one it uses loads fine and fails only when the call reaches the
    name (Redis: "attempt to access nonexistent global"): LIB_PARTS must be in use order."""
    trees = [_tree((LIB_DIR / f"{part}.lua").read_text()) for part in LIB_PARTS]
    declared = [_declared_at_top(tree) for tree in trees]
    for i, part in enumerate(LIB_PARTS):
        later = set().union(*declared[i + 1 :])
        assert not declared[i] & later, f"{part}.lua redeclares {declared[i] & later}"
        too_early = _names_used(trees[i]) & later
        assert not too_early, f"{part}.lua uses {sorted(too_early)} from a later part"
