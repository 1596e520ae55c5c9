"""The write buffer's rule: hashes and sorted sets only through lua/lib/core.lua's primitives.

Every operation reads and writes hashes and sorted sets through core.lua's buffer (hget,
prefetch, hset, hdel, hexists, zadd, zrem, zread) and counters (bump, counter). A `redis.call`
on a hash or sorted set anywhere else reads past the call's buffered writes (an HGET that misses
an hset made earlier in the same call) or writes under them (the flush at the end overwrites
it). Nothing at run time notices: the reply is merely wrong now and then. So this test reads
every Lua file but core.lua as Lua (a real parser: comments and strings are not code) and fails
on any `redis.call`/`redis.pcall` whose command is a hash or sorted-set command, in any case,
or whose command it cannot read (not a string literal, `redis.call` taken as a value, `redis`
itself aliased). Key-level commands (EXISTS, PTTL, PEXPIRE, DEL) are not in the rule: `extend`,
the one that needs it, flushes first.
"""

from __future__ import annotations

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


def _walk(
    node: astnodes.Node, parent: astnodes.Node | None = None, function: str = ""
) -> Iterator[tuple[astnodes.Node, astnodes.Node | None, str]]:
    """Every node with its parent and the name of the function it is in."""
    yield node, parent, function
    if isinstance(node, (astnodes.LocalFunction, astnodes.Function)):
        function = ast.to_lua_source(node.name)
    for child in _children(node):
        yield from _walk(child, node, function)


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

    for node, parent, function in _walk(ast.parse(source)):
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


def _ruled_files() -> list[Path]:
    files = sorted(LUA_DIR.glob("*.lua")) + sorted(LIB_DIR.glob("*.lua"))
    return [f for f in files if f != CORE]


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
    planted = source.replace("zread('ZCARD', key)", "redis.call('zcard', key)")
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
