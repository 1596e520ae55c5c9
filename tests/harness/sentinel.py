"""A Redis Sentinel deployment on loopback ports, owned by one test: a primary, a replica and
three Sentinels (quorum 2) watching them with a short ``down-after-milliseconds``, so a stopped
primary is replaced within a few seconds. Every process is the Debian ``redis-server`` binary
(Sentinel mode is ``redis-server <config> --sentinel``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from pool_admin.localservices import RedisServer

MASTER = "pool"
#: A primary silent this long is down for a Sentinel (redis-py's own tests use 60 s; a test
#: wants seconds).
DOWN_AFTER_MS = 500
FAILOVER_TIMEOUT_MS = 2_000


class SentinelServer(RedisServer):
    """One Sentinel watching ``MASTER`` at ``primary_port`` (its config file rewritten at each
    start: Sentinel keeps its state in it)."""

    def __init__(self, directory: Path, primary_port: int, quorum: int = 2) -> None:
        super().__init__(directory)
        self.primary_port, self.quorum = primary_port, quorum

    def argv(self) -> list[str]:
        config = self.directory / f"sentinel-{self.port}.conf"
        config.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {self.directory}\nlogfile {self.logfile}\n"
            f"sentinel monitor {MASTER} 127.0.0.1 {self.primary_port} {self.quorum}\n"
            f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {MASTER} 1\n"
        )
        return [self.binary, str(config), "--sentinel"]


class SentinelDeployment:
    def __init__(self, directory: Path) -> None:
        # A full sync starts at once, not after the default 5 s wait for more replicas.
        at_once = ("--repl-diskless-sync-delay", "0")
        self.primary = RedisServer(directory / "primary", args=at_once)
        self.replica = RedisServer(
            directory / "replica",
            args=(*at_once, "--replicaof", "127.0.0.1", str(self.primary.port)),
        )
        self.sentinels = [
            SentinelServer(directory / f"sentinel-{n}", self.primary.port) for n in range(3)
        ]

    @property
    def url(self) -> str:
        """The deployment as the project's settings name it (activity/redis_url.py)."""
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{MASTER}/0"

    def start(self, timeout: float = 20.0) -> None:
        self.primary.start()
        self.replica.start()
        for sentinel in self.sentinels:
            sentinel.start()
        deadline = time.monotonic() + timeout
        # Ready when the replica is in sync and every Sentinel knows the other two and the
        # replica (a failover needs both).
        while not self._ready():
            if time.monotonic() > deadline:
                raise RuntimeError("the Sentinel deployment did not come together in time")
            time.sleep(0.1)

    def _ready(self) -> bool:
        try:
            replica = _info(self.replica.port, "replication")
            if replica.get("master_link_status") != "up":
                return False
            for sentinel in self.sentinels:
                with _client(sentinel.port) as client:
                    if len(client.sentinel_sentinels(MASTER)) < 2:
                        return False
                    if len(client.sentinel_slaves(MASTER)) < 1:
                        return False
        except (redis.RedisError, OSError):
            return False
        return True

    def master_port(self) -> int:
        """Where the Sentinels say the master is now."""
        for sentinel in self.sentinels:
            try:
                with _client(sentinel.port) as client:
                    found = client.sentinel_get_master_addr_by_name(MASTER)
            except (redis.RedisError, OSError):
                continue
            if found:
                return int(found[1])
        raise RuntimeError("no Sentinel answered where the master is")

    def synced(self, timeout: float = 5.0) -> None:
        """Until the replica has every write the primary took (what an asynchronous failover
        would otherwise lose)."""
        with _client(self.master_port()) as client:
            if client.wait(1, int(timeout * 1000)) < 1:
                raise RuntimeError("the replica did not catch up")

    def wait_for_new_master(self, old_port: int, timeout: float = 15.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            port = self.master_port()
            if port != old_port and _info(port, "replication").get("role") == "master":
                return port
            time.sleep(0.1)
        raise RuntimeError(f"no new master within {timeout} s")

    @contextmanager
    def replication_held(self) -> Iterator[None]:
        """Writes the primary acknowledges meanwhile never reach the replica if the primary is
        lost inside (``lose_primary``): what an asynchronous failover loses."""
        with replication_held(self.replica.port):
            yield

    def lose_primary(self) -> None:
        lose_primary(self.primary, self.replica.port)

    def stop(self) -> None:
        for server in (*self.sentinels, self.replica, self.primary):
            server.kill()

    def __enter__(self) -> SentinelDeployment:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextmanager
def replication_held(replica_port: int) -> Iterator[None]:
    """The replica stops applying its primary's stream (a replica under ``CLIENT PAUSE`` does
    not process it); what the primary acknowledges meanwhile waits, unapplied, on the replica."""
    with _client(replica_port) as client:
        client.execute_command("CLIENT", "PAUSE", 30_000, "WRITE")
        try:
            yield
        finally:
            client.execute_command("CLIENT", "UNPAUSE")


def lose_primary(primary: RedisServer, replica_port: int, timeout: float = 5.0) -> None:
    """Kill the primary and wait until its replica knows: a replica drops what it had not
    applied from a master it lost (inside ``replication_held``, that is every write since)."""
    primary.kill()
    deadline = time.monotonic() + timeout
    while _info(replica_port, "replication").get("master_link_status") != "down":
        if time.monotonic() > deadline:
            raise RuntimeError("the replica did not notice its primary was gone")
        time.sleep(0.02)


def _client(port: int) -> redis.Redis:
    return redis.Redis(port=port, socket_timeout=1, socket_connect_timeout=1, decode_responses=True)


def _info(port: int, section: str) -> dict[str, object]:
    with _client(port) as client:
        info: dict[str, object] = client.info(section)
        return info
