"""The gateway end to end: a real worker process (``python -m gateway_runtime``) gets its
snapshot from the real control plane (the project's web server, the real ownership manager)
and carries clients' traffic (curl and httpx) through real upstream proxies (Debian's
tinyproxy with Basic auth, microsocks with username/password) to a local HTTP and a local
HTTPS target; its reports count the tunnels it holds, and what it carried reaches the usage
history. Stopped, it lets a tunnel in flight finish and exits cleanly."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from activity import FetchedBatch, FetchedProxy, HealthUpdate, PoolOptions, ProxyState, RedisPool
from activity.credentials import StaticCredentials
from activity.ownership_manager import ManagerPolicy, OwnershipManager
from pool_admin import bootstrap
from pool_admin.config.models import GatewayTraffic
from pool_admin.gateway_tasks import configured_groups, gateway_shares
from pool_admin.localservices import free_port
from tests.gateway.conftest import get_through, open_tunnel
from tests.harness.gateway_fixtures import (
    MICROSOCKS_LOGIN,
    TINYPROXY_LOGIN,
    microsocks,
    target,
    tinyproxy,
    tls_target,
)
from tests.harness.gateway_process import gateway_worker_process
from tests.harness.metrics import drain_metrics, wait_until
from tests.harness.web_server import project_web_server

__all__ = ["microsocks", "target", "tinyproxy", "tls_target"]

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres, pytest.mark.redis]

#: A worker process and its ports (``http``, ``socks``, ``metrics``) and its ``worker`` row.
Running = tuple[subprocess.Popen[bytes], dict]
#: Short intervals so the test sees reports and snapshots within a second or two.
FAST = {"GATEWAY_SNAPSHOT_INTERVAL_S": "1", "GATEWAY_REPORT_INTERVAL_S": "1"}


@pytest.fixture
def web_server(redis_url, unique_prefix, tmp_path):
    with project_web_server(redis_url, unique_prefix, tmp_path, workers=1, env=FAST) as port:
        yield port


def seed_local(redis_url: str, prefix: str, tinyproxy_port: int, microsocks_port: int) -> None:
    """Three proxies of upstream acme-us: two through the tinyproxy, one through the microsocks,
    with their logins (the pool keeps a proxy's login with it, resolved when it is upserted)."""
    logins = StaticCredentials()
    good = logins.put(*TINYPROXY_LOGIN)
    socks = logins.put(*MICROSOCKS_LOGIN)
    now = datetime.now(UTC)
    proxies = [
        FetchedProxy(
            proxy_id=pid,
            unique_key=f"{pid}@127.0.0.1:{port}",
            host="127.0.0.1",
            port=port,
            protocol=protocol,
            expires_at=now + timedelta(minutes=30),
            region="us",
            carrier=None,
            secret_ref=ref.ref,
        )
        for pid, port, protocol, ref in (
            ("e2e-t1", tinyproxy_port, "http", good),
            ("e2e-t2", tinyproxy_port, "http", good),
            ("e2e-s1", microsocks_port, "socks5", socks),
        )
    ]
    import redis

    client = redis.Redis.from_url(redis_url)
    pool = RedisPool(client, PoolOptions(prefix=prefix), credentials=logins)
    try:
        pool.upsert_fetched(FetchedBatch("acme-us", proxies, 1000, timedelta(seconds=5), now))
        pool.apply_health(
            [HealthUpdate(p.proxy_id, ProxyState.AVAILABLE, now, latency_ms=5) for p in proxies]
        )
    finally:
        pool.close()
        client.close()


@contextlib.contextmanager
def running_worker(
    control_port: int, make_worker
) -> Iterator[tuple[subprocess.Popen[bytes], dict]]:
    """``python -m gateway_runtime`` as worker edge-1 of the control plane on ``control_port``:
    the process and its ports."""
    w = make_worker()
    with gateway_worker_process(control_port, w.plaintext) as (proc, ports):
        yield proc, {**ports, "worker": w}


@pytest.fixture
def worker_process(web_server, make_worker) -> Iterator[Running]:
    with running_worker(web_server, make_worker) as running:
        yield running


def assign_local_proxies(redis_url, prefix, upstreams, tinyproxy, microsocks, pool_clock) -> None:
    """The worker's group gets the three local proxies (the ownership manager's tick), once the
    worker opened its session."""
    upstreams.us.gateway_share_percent = 100
    upstreams.us.save()
    seed_local(redis_url, prefix, tinyproxy.port, microsocks.port)
    pool = bootstrap.get_pool()
    wait_until(lambda: pool.worker_revision("edge-1").session, 20, "the worker opened a session")
    manager = OwnershipManager(pool, pool_clock, ManagerPolicy())
    tally = manager.tick(configured_groups(), gateway_shares()).groups["edge-us"]
    assert tally.assigned == 3


def test_a_worker_serves_from_the_control_planes_snapshot(
    worker_process, upstreams, make_client, redis_url, unique_prefix, pool_clock,
    tinyproxy, microsocks, target, tls_target,
):  # fmt: skip
    proc, ports = worker_process
    key = make_client("shop", gateway_enabled=True).plaintext
    assign_local_proxies(redis_url, unique_prefix, upstreams, tinyproxy, microsocks, pool_clock)
    pool = bootstrap.get_pool()
    ready = f"http://127.0.0.1:{ports['metrics']}/ready"
    wait_until(lambda: httpx.get(ready).status_code == 200, 20, "the worker serves a snapshot")
    metrics = f"http://127.0.0.1:{ports['metrics']}/metrics"
    wait_until(
        lambda: "proxypool_worker_snapshot_proxies 3.0" in httpx.get(metrics).text,
        20,
        "the worker's snapshot holds the three proxies",
    )

    proxy = f"http://shop:{key}@127.0.0.1:{ports['http']}"
    with httpx.Client(proxy=proxy) as http:
        assert [http.get(target.url()).status_code for _ in range(6)] == [200] * 6
    with httpx.Client(proxy=proxy, verify=tls_target.client_context()) as http:
        assert http.get(tls_target.url()).json()["method"] == "GET"
    for via in (["-x", f"http://127.0.0.1:{ports['http']}"],
                ["--socks5-hostname", f"127.0.0.1:{ports['socks']}"]):  # fmt: skip
        done = subprocess.run(
            ["curl", "-sS", "--fail", "--cacert", str(tls_target.cert), *via,
             "--proxy-user", f"shop-protocol-socks5:{key}", tls_target.url()],
            capture_output=True, timeout=20, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr

    # A tunnel held open is counted in the worker's reports; closed, it no longer is.
    tunnel, head = open_tunnel(ports["http"], target.port, "shop", key)
    assert head.startswith(b"HTTP/1.1 200")

    def held() -> dict[str, int]:
        runtime = pool.read_runtime("edge-1")
        return (
            {} if runtime is None else {e.proxy_id: e.active for e in runtime.entries if e.active}
        )

    assert (
        sum(wait_until(held, 20, "the tunnel in a report").values()) >= 1
    )  # kept connections count too
    assert get_through(tunnel).startswith(b"HTTP/1.1 200")

    # What it carried reaches the usage history (by group, upstream and client).
    def carried() -> list[GatewayTraffic]:
        drain_metrics()
        return list(GatewayTraffic.objects.filter(worker_group="edge-us", upstream="acme-us"))

    rows = wait_until(carried, 20, "the worker's traffic in the usage history")
    assert sum(r.requests for r in rows) >= 6
    assert sum(r.tunnels for r in rows) >= 3
    assert sum(r.bytes_down for r in rows) > 0 and {r.client for r in rows} == {"shop"}

    # SIGTERM: the tunnel in flight may finish; the worker exits cleanly, its counts at zero.
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    assert get_through(tunnel).startswith(b"HTTP/1.1 200")
    tunnel.close()
    assert proc.wait(15) == 0
    output = proc.stdout.read().decode() if proc.stdout else ""
    assert "Traceback" not in output
    assert key not in output
    wait_until(lambda: not held(), 20, "the final report at zero")


def test_with_the_control_plane_stopped_the_worker_serves_until_its_staleness_limit(
    redis_url, unique_prefix, tmp_path, make_worker, make_client, upstreams, pool_clock,
    tinyproxy, microsocks, target,
):  # fmt: skip
    env = {**FAST, "GATEWAY_MAX_STALENESS_S": "5"}  # the least the settings allow
    port = free_port()
    key = make_client("shop", gateway_enabled=True).plaintext
    proxy = ""
    with running_worker(port, make_worker) as (proc, ports):
        proxy = f"http://shop:{key}@127.0.0.1:{ports['http']}"
        with project_web_server(redis_url, unique_prefix, tmp_path, 1, env, port=port):
            assign_local_proxies(
                redis_url, unique_prefix, upstreams, tinyproxy, microsocks, pool_clock
            )
            metrics = f"http://127.0.0.1:{ports['metrics']}/metrics"
            wait_until(
                lambda: "proxypool_worker_snapshot_proxies 3.0" in httpx.get(metrics).text,
                20,
                "the worker's snapshot holds the three proxies",
            )
            with httpx.Client(proxy=proxy) as http:
                assert http.get(target.url()).status_code == 200
        stopped = time.monotonic()  # the control plane is down: connections are refused

        with httpx.Client(proxy=proxy) as http:
            fresh = http.get(target.url())
            assert fresh.status_code == 200, (fresh.text, time.monotonic() - stopped)  # still fresh

            def refused() -> httpx.Response | None:
                answer = http.get(target.url())
                return answer if answer.status_code == 503 else None

            stale = wait_until(refused, 20, "503 past the staleness limit")
            waited = time.monotonic() - stopped
            assert 2.0 < waited < 5 + 1 + 5, waited  # the limit, after the last confirmation
            assert "no current snapshot" in stale.text and stale.headers["retry-after"] == "5"

            with project_web_server(redis_url, unique_prefix, tmp_path, 1, env, port=port):
                back = wait_until(
                    lambda: http.get(target.url()).status_code == 200,
                    30,
                    "the worker serving again once the control plane is back",
                )
                assert back
        assert proc.poll() is None, "the worker ran through the outage"
