"""Which Redis a URL names, and a client on it.

``redis://``, ``rediss://`` and ``unix://`` are read by redis-py as they are. ``redis+sentinel://``
names a master that Redis Sentinel watches and fails over (ADR-005 "部署边界": one instance or
Sentinel):

    redis+sentinel://[[username]:password@]host:port[,host:port...]/master_name[/db]

e.g. ``redis+sentinel://:s3cret@10.0.0.5:26379,10.0.0.6:26379,10.0.0.7:26379/pool/0``. The
client asks the Sentinels where the master is whenever it makes a connection (redis-py's
``Sentinel.master_for``), so after a failover its next connection reaches the new master; a
connection still open to a demoted master is dropped at its first write (READONLY). The
password is the data nodes' (the master's, its replicas'); it is never sent to the Sentinels, so
Sentinels that ask for a password of their own are not supported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

if TYPE_CHECKING:  # the parsing is also the settings' and the gateway worker's (no Redis there)
    import redis

SENTINEL_SCHEME = "redis+sentinel"
#: How long a Sentinel may take to answer where the master is. Short: a Sentinel that does not
#: answer is skipped for the next one; the data connection keeps its own timeouts.
SENTINEL_TIMEOUT_S = 1.0
#: At most this many Sentinels in one URL (a deployment runs 3 or 5).
MAX_SENTINELS = 16


class RedisURLError(ValueError):
    """A Redis URL that names no usable server; the message says what is wrong, never the
    password."""


@dataclass(frozen=True, slots=True)
class SentinelTarget:
    """A ``redis+sentinel://`` URL, read."""

    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)


def is_sentinel_url(url: str) -> bool:
    return url.split("://", 1)[0].lower() == SENTINEL_SCHEME


def parse_sentinel_url(url: str) -> SentinelTarget:
    """The Sentinels, the master's name and the database of a ``redis+sentinel://`` URL."""
    parts = urlsplit(url)
    if parts.scheme.lower() != SENTINEL_SCHEME:
        raise RedisURLError(f"a Sentinel URL starts with {SENTINEL_SCHEME}://")
    login, at, hosts = parts.netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = login.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    sentinels = []
    for item in hosts.split(","):
        host, colon, port = item.strip().rpartition(":")
        if not colon or not _printable(host) or not port.isdigit() or not 0 < int(port) < 65_536:
            raise RedisURLError(
                f"each Sentinel is host:port, comma-separated (got {item.strip()!r})"
            )
        sentinels.append((host.strip("[]"), int(port)))
    if len(sentinels) > MAX_SENTINELS:
        raise RedisURLError(f"at most {MAX_SENTINELS} Sentinels in one URL")
    path = [p for p in parts.path.split("/") if p]
    if not path or len(path) > 2:
        raise RedisURLError("a Sentinel URL's path is /master_name or /master_name/db")
    if not _printable(unquote(path[0])):
        raise RedisURLError("the master's name must be printable, without spaces")
    db = path[1] if len(path) == 2 else "0"
    if not db.isdigit():
        raise RedisURLError(f"the database must be a number (got {db!r})")
    return SentinelTarget(tuple(sentinels), unquote(path[0]), int(db), username, password)


def _printable(text: str) -> bool:
    """Not empty, and no space or control character (a host's or a master's name)."""
    return bool(text) and all(c.isprintable() and not c.isspace() for c in text)


def connect(url: str, **options: Any) -> redis.Redis:
    """A client on the Redis ``url`` names (``options``: redis-py's, e.g. ``socket_timeout``);
    through Sentinel for a ``redis+sentinel://`` URL."""
    import redis
    from redis.sentinel import Sentinel

    if not is_sentinel_url(url):
        return redis.Redis.from_url(url, **options)
    target = parse_sentinel_url(url)
    sentinel = Sentinel(
        list(target.sentinels),
        socket_timeout=SENTINEL_TIMEOUT_S,
        socket_connect_timeout=SENTINEL_TIMEOUT_S,
    )
    client: redis.Redis = sentinel.master_for(
        target.master,
        db=target.db,
        username=target.username,
        password=target.password,
        **options,
    )
    return client


def kombu_sentinel(url: str) -> tuple[str, dict[str, Any]]:
    """A ``redis+sentinel://`` URL as Celery's broker settings read it: kombu's
    ``sentinel://[:password@]host:port/db`` URLs joined by ``;`` (no trailing one: kombu would
    add a localhost Sentinel) and its transport options (the master's name)."""
    target = parse_sentinel_url(url)
    login = ""
    if target.password is not None:
        login = f"{quote(target.username or '', safe='')}:{quote(target.password, safe='')}@"
    broker = ";".join(
        f"sentinel://{login}{_authority(host, port)}/{target.db}" for host, port in target.sentinels
    )
    options = {
        "master_name": target.master,
        "sentinel_kwargs": {
            "socket_timeout": SENTINEL_TIMEOUT_S,
            "socket_connect_timeout": SENTINEL_TIMEOUT_S,
        },
    }
    return broker, options


def _authority(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
