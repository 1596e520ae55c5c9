"""The production layout (deploy/, docs/DEPLOY.md) brought up on this machine from its files.

Each unit's command runs as the unit states it (tests/harness/layout.py has the only
substitutions: paths, ports, the values an operator would put in the env files): two web
servers behind nginx (TLS with a test CA), the fetch, check and upkeep Celery workers, one beat,
the usage stream's consumer, the pool's Redis behind three Sentinels, the usage stream's Redis
from deploy/redis/metrics.conf, the test's PostgreSQL, and two gateway workers speaking to the
control plane through nginx with client certificates. Then: the demo provider fetched into the
pool, an extract through nginx over TLS, a request through each gateway worker to a local
target, workers without a good certificate refused, the real client address in the web
servers' access log; then everything stopped, none of it killed."""

from __future__ import annotations

import json
import secrets
import signal
import ssl
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet

from pool_admin.config.models import Upstream, WorkerGroup
from pool_admin.demo_proxies import DemoProxies
from pool_admin.launcher import Child, child_commands, group_alive, web_command
from pool_admin.localservices import free_port, redis_server_binary
from tests.harness.commands import database_url_of_test_db
from tests.harness.http_target import HttpTarget
from tests.harness.layout import (
    DEPLOY,
    LayoutError,
    Paths,
    UnitRunner,
    nginx_binary,
    nginx_main_config,
    read_env_file,
    replace_each,
    wait_for,
)
from tests.harness.pki import TestCA
from tests.harness.sentinel import MASTER, SentinelDeployment

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

API_KEY = "pp_0123456789ab_" + "layoutkey" * 5
WORKERS = ("edge-1", "edge-2")
#: What the test sets in deploy/env/proxypool.env besides its URLs and secrets: small, the
#: machine is shared.
SIZES = {"WEB_WORKERS": "1", "FETCH_WORKER_THREADS": "4", "CHECK_WORKER_THREADS": "2",
         "UPKEEP_WORKER_THREADS": "2"}  # fmt: skip


def redis_conf(name: str) -> dict[str, str]:
    pairs = {}
    for line in (DEPLOY / "redis" / name).read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.strip().partition(" ")
            pairs.setdefault(key, value)
    return pairs


def test_the_redis_files_keep_the_pool_off_disk_and_the_stream_on_it():
    pool, metrics = redis_conf("pool.conf"), redis_conf("metrics.conf")
    assert (pool["save"], pool["appendonly"], pool["maxmemory-policy"]) == (
        '""',
        "no",
        "noeviction",
    )
    assert (metrics["appendonly"], metrics["maxmemory-policy"]) == ("yes", "noeviction")
    sentinel = (DEPLOY / "redis" / "sentinel.conf").read_text()
    assert f"sentinel monitor {MASTER} " in sentinel and " 6379 2\n" in sentinel  # quorum 2 of 3


@pytest.mark.django_db
def test_the_units_run_exactly_the_launchers_commands(tmp_path, settings):
    """make run and the units start the same processes: a change to one shows in the other."""
    paths = Paths(tmp_path)
    paths.make()
    paths.write_env("proxypool.env", {
        "WEB_WORKERS": "3",
        "FETCH_WORKER_THREADS": str(settings.FETCH_WORKER_THREADS),
        "CHECK_WORKER_THREADS": str(settings.CHECK_WORKER_THREADS),
        "UPKEEP_WORKER_THREADS": str(settings.UPKEEP_WORKER_THREADS),
    })  # fmt: skip
    runner = UnitRunner(paths)
    assert runner.command("proxypool-web@.service", "8001")[0] == web_command("127.0.0.1:8001", 3)
    launched = dict(child_commands("127.0.0.1:8001"))
    for unit, role in [
        ("proxypool-fetch-worker.service", "fetch worker"),
        ("proxypool-check-worker.service", "check worker"),
        ("proxypool-upkeep-worker.service", "upkeep worker"),
        ("proxypool-beat.service", "celery beat"),
        ("proxypool-metrics-consumer.service", "metrics consumer"),
    ]:
        assert runner.command(unit)[0] == launched[role], unit
    paths.write_env("gateway.env", {})
    paths.write_env("gateway/edge-1.env", {})
    argv, env, _ = runner.command("proxypool-gateway@.service", "edge-1")
    assert argv == [sys.executable, "-m", "gateway_runtime"]
    assert env["GATEWAY_CLIENT_KEY"] == f"{paths.etc}/tls/edge-1.key"
    assert env["GATEWAY_TOKEN_FILE"] == f"{paths.etc}/gateway/edge-1.token"
    with pytest.raises(LayoutError, match="does not declare NOT_A_SETTING"):
        paths.write_env("proxypool.env", {"NOT_A_SETTING": "1"})


class Layout:
    """The running layout: what the steps of the test need to reach it."""

    def __init__(self, root: Path) -> None:
        self.paths = Paths(root)
        self.paths.make()
        self.prefix = f"t-{secrets.token_hex(6)}"
        self.runner = UnitRunner(self.paths, base_env={
            "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(root),
            # Test-only: the pool's keys under a prefix of their own, and the demo provider's
            # vendor emulator on (the layout's own settings have neither).
            "POOL_PREFIX": self.prefix, "DEMO": "1",
        })  # fmt: skip
        self.web_ports = [free_port(), free_port()]
        self.https_port, self.gateway_api_port = free_port(), free_port()
        self.ca = TestCA(self.paths.etc / "tls", "control")
        self.ca.issue("server", server=True)
        self.workers_ca = TestCA(self.paths.etc / "tls", "workers")

    def env(self) -> dict[str, str]:
        return read_env_file(self.paths.etc / "proxypool.env") | self.runner.base_env

    def manage(self, *args: str, **extra: str) -> str:
        """``manage.py ARGS`` as the operator runs it, with /etc/proxypool/proxypool.env."""
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=self.paths.localize("/opt/proxypool/app"),
            env={**self.env(), **extra}, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    def start_metrics_redis(self, password: str) -> int:
        port = free_port()
        directory = self.paths.root / "redis-metrics"
        directory.mkdir()
        text = replace_each((DEPLOY / "redis" / "metrics.conf").read_text(), {
            "bind 0.0.0.0": "bind 127.0.0.1", "port 6380": f"port {port}",
            "dir /var/lib/redis/metrics": f"dir {directory}",
            "pidfile /run/redis-metrics/": f"pidfile {directory}/",
            "requirepass CHANGE-ME": f"requirepass {password}",
        }, "deploy/redis/metrics.conf")  # fmt: skip
        config = directory / "redis.conf"
        config.write_text(text + f"logfile {self.paths.logs}/redis-metrics.log\n")
        binary = redis_server_binary()
        assert binary is not None
        proc = subprocess.Popen([binary, str(config)], stdout=subprocess.DEVNULL,
                                start_new_session=True)  # fmt: skip
        self.runner.children.append(Child("metrics redis", proc))
        return port

    def start_nginx(self) -> None:
        text = self.paths.localize((DEPLOY / "nginx" / "proxypool.conf").read_text())
        site = replace_each(text, {
            "listen 443 ssl": f"listen 127.0.0.1:{self.https_port} ssl",
            "listen 8443 ssl": f"listen 127.0.0.1:{self.gateway_api_port} ssl",
            "server 127.0.0.1:8001": f"server 127.0.0.1:{self.web_ports[0]}",
            "server 127.0.0.1:8002": f"server 127.0.0.1:{self.web_ports[1]}",
        }, "deploy/nginx/proxypool.conf")  # fmt: skip
        config = nginx_main_config(self.paths, site)
        with (self.paths.logs / "nginx.log").open("ab") as out:
            proc = subprocess.Popen([nginx_binary(), "-c", str(config)], stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        self.runner.children.append(Child("nginx", proc))

    def trusting(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.ca.cert)

    def https(self, **options: object) -> httpx.Client:
        return httpx.Client(
            base_url=f"https://localhost:{self.https_port}", verify=self.trusting(),
            timeout=10, **options,  # type: ignore[arg-type]
        )  # fmt: skip

    def gateway(self, name: str) -> tuple[int, str]:
        """Worker ``name``'s files as the operator puts them on machine C: its certificate, its
        token (``create_worker``), its binds; the HTTP proxy's port."""
        self.workers_ca.issue(name, server=False)
        token = self.manage("create_worker", name, "--group", "edge").strip().splitlines()[-1]
        token_file = self.paths.etc / "gateway" / f"{name}.token"
        token_file.write_text(token + "\n")
        token_file.chmod(0o600)
        port = free_port()
        self.paths.write_env("gateway/edge-1.env", {
            "GATEWAY_BIND": f"127.0.0.1:{port}", "GATEWAY_SOCKS_BIND": "",
            "GATEWAY_METRICS_BIND": "",
        }, name=f"gateway/{name}.env")  # fmt: skip
        return port, token


@pytest.fixture
def layout(tmp_path):
    """Under tmp_path, so a failed run's logs stay for reading (pytest keeps the last three)."""
    made = Layout(tmp_path)
    try:
        yield made
    finally:
        made.runner.stop()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_layout_comes_up_from_its_files_serves_and_stops(layout: Layout, capsys):
    paths, runner = layout.paths, layout.runner
    nginx_binary()  # installed by localservices install --tests, else a clear failure now
    with SentinelDeployment(paths.root / "redis") as sentinel, HttpTarget() as target:
        pool_url = sentinel.url.removesuffix("/0")
        metrics_password = secrets.token_hex(8)
        metrics_port = layout.start_metrics_redis(metrics_password)
        paths.write_env("proxypool.env", {
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "POOL_SECRET_KEY": Fernet.generate_key().decode(),
            "ALLOWED_HOSTS": "localhost,127.0.0.1", "WEB_TRUSTED_PROXIES": "127.0.0.1/32",
            "DATABASE_URL": database_url_of_test_db(),
            "REDIS_URL": f"{pool_url}/0", "CELERY_BROKER_URL": f"{pool_url}/1",
            "METRICS_REDIS_URL": f"redis://:{metrics_password}@127.0.0.1:{metrics_port}/0",
            **SIZES,
        })  # fmt: skip
        paths.write_env("gateway.env", {
            "GATEWAY_CONTROL_URL": f"https://localhost:{layout.gateway_api_port}",
        })  # fmt: skip

        # The operator's first steps (docs/DEPLOY.md): the demo provider as the pool's
        # upstream, a worker group and its two workers.
        demo = DemoProxies(paths.state)
        demo.start()
        try:
            first_web = f"http://127.0.0.1:{layout.web_ports[0]}"
            layout.manage("ensure_demo", "--base-url", first_web, DEMO_API_KEY=API_KEY)
            # Two connections a worker: the demo proxies take one each, and the gateway may hold
            # half of the twelve (what the first worker to come takes, it drains for the other).
            group = WorkerGroup.objects.create(name="edge", target_capacity=4)
            group.allowed_upstreams.set(Upstream.objects.filter(name="demo"))
            gateways = {name: layout.gateway(name) for name in WORKERS}

            for port in layout.web_ports:
                runner.start("proxypool-web@.service", str(port))
            layout.start_nginx()
            for unit in ("fetch-worker", "check-worker", "upkeep-worker", "beat",
                         "metrics-consumer"):  # fmt: skip
                runner.start(f"proxypool-{unit}.service")
            for name in WORKERS:
                runner.start("proxypool-gateway@.service", name)
            started = time.monotonic()
            with layout.https() as https:
                wait_for("the web tier through nginx", lambda: https.get("/healthz").status_code
                         == 200, 60, runner.children)  # fmt: skip
                check_the_gateway_port_refuses_the_public(https)
                auth = {"Authorization": f"Bearer {API_KEY}"}

                def fetched() -> bool:
                    rows = https.get("/api/v1/inventory", headers=auth).json()["upstreams"]
                    return any(r["upstream"] == "demo" and r["extractable"] for r in rows)

                wait_for("a fetch of the demo provider", fetched, 60, runner.children)
            check_an_extract_through_nginx_keeps_the_client_address(layout, auth)
            for name, (port, _) in gateways.items():
                check_a_request_through_the_worker(layout, name, port, target)
            check_the_doctor_finds_the_layout_well(layout)
            check_workers_without_a_good_certificate_are_refused(layout)
            up_for = time.monotonic() - started
        finally:
            demo.stop()
            children = list(runner.children)
            runner.stop()
        killed = [c.name for c in children if c.proc.returncode == -signal.SIGKILL]
        assert not killed, f"had to be killed: {killed}"
        assert "did not stop" not in capsys.readouterr().out  # no group needed a SIGKILL
        assert not [c.name for c in children if group_alive(c.pgid)]
        for name, (_, token) in gateways.items():
            log = runner.log("proxypool-gateway@.service", name).read_text()
            assert token not in log and "stopped" in log, log[-2000:]
        print(f"layout served for {up_for:.1f} s")


#: What ``manage.py doctor`` must find well in the layout: every store as deploy/ configures
#: it (the pool's Redis off disk, the stream's with AOF, both pool roles through three
#: Sentinels with a replica), every process, both gateway workers.
DOCTOR_OK = {
    "postgres", "redis:pool", "redis:metrics", "redis:broker", "sentinel:pool",
    "sentinel:broker", "lua:pool", "lua:metrics", "clock", "celery:fetches", "celery:checks",
    "celery:celery", "beat", "metrics-consumer", "gateway", "alerts",
}  # fmt: skip


def check_the_doctor_finds_the_layout_well(layout: Layout) -> None:
    """``manage.py doctor`` as the operator runs it on machine A exits 0, every check but the
    configuration's ok (that one warns of Django's deployment checks the test's plain-HTTP web
    servers do not meet), within a report interval or two of the workers' first requests."""
    found: dict[str, tuple[str, str]] = {}

    def well() -> bool:
        document = json.loads(layout.manage("doctor", "--json"))  # asserts exit 0
        found.clear()
        found.update({c["name"]: (c["status"], c["summary"]) for c in document["checks"]})
        return all(found.get(name, ("",))[0] == "ok" for name in DOCTOR_OK)

    try:
        wait_for("the doctor to find all well", well, 30, layout.runner.children)
    except LayoutError as exc:
        raise LayoutError(f"{exc}: {found}") from None
    assert "2 live worker(s)" in found["gateway"][1]


def check_the_gateway_port_refuses_the_public(https: httpx.Client) -> None:
    answer = https.post("/api/v1/gateway/sessions", json={})
    assert answer.status_code == 403 and answer.json()["code"] == "gateway_port_only"


def check_an_extract_through_nginx_keeps_the_client_address(
    layout: Layout, auth: dict[str, str]
) -> None:
    """From 127.0.0.2 through nginx: the web servers' access log says 127.0.0.2. Straight to a
    web server from 127.0.0.3 claiming another address: its log says 127.0.0.3."""
    transport = httpx.HTTPTransport(local_address="127.0.0.2", verify=layout.trusting())
    with layout.https(transport=transport) as https:
        answer = https.post("/api/v1/extract", headers=auth,
                            json={"count": 1, "filters": {"upstream": "demo"}})  # fmt: skip
        # Readiness (a PostgreSQL and a Redis connection a request) only for the deployment's
        # own networks: 127.0.0.2 is not one of them.
        assert https.get("/readyz").status_code == 403
    assert answer.status_code == 200, answer.text
    assert answer.json()["returned"] == 1
    with layout.https() as own:
        assert own.get("/readyz").status_code == 200
    spoofed = {"X-Real-IP": "203.0.113.9", "X-Forwarded-For": "203.0.113.9", "Host": "localhost"}
    direct = httpx.HTTPTransport(local_address="127.0.0.3")
    with httpx.Client(transport=direct, timeout=10) as client:
        url = f"http://127.0.0.1:{layout.web_ports[1]}/healthz"
        assert client.get(url, headers=spoofed).status_code == 200

    def logged() -> str:
        return "".join(
            layout.runner.log("proxypool-web@.service", str(p)).read_text()
            for p in layout.web_ports
        )

    wait_for("the access log lines", lambda: '127.0.0.3 - "GET /healthz' in logged(), 10, [])
    assert '127.0.0.2 - "POST /api/v1/extract HTTP/1.1" 200' in logged()
    assert "203.0.113.9" not in logged()


def check_a_request_through_the_worker(
    layout: Layout, name: str, port: int, target: HttpTarget
) -> None:
    proxy = f"http://demo:{API_KEY}@127.0.0.1:{port}"
    answers: list[str] = []

    def served() -> bool:
        try:
            with httpx.Client(proxy=proxy, timeout=10) as through:
                answer = through.get(target.url("/echo"))
        except httpx.HTTPError as exc:
            answers.append(type(exc).__name__)
            return False
        answers.append(f"{answer.status_code} {answer.text[:100]}")
        return answer.status_code == 200

    # The ownership manager's tick (beat, the upkeep worker) assigns the worker proxies; its
    # snapshot comes with the next poll.
    try:
        wait_for(f"a request through {name}", served, 60, layout.runner.children)
    except LayoutError as exc:
        log = layout.runner.log("proxypool-gateway@.service", name).read_text()[-1500:]
        raise LayoutError(f"{exc}; last answers {answers[-3:]}; its log:\n{log}") from None


def said(log: Path, text: str) -> bool:
    return text in log.read_text()


def check_workers_without_a_good_certificate_are_refused(layout: Layout) -> None:
    """A worker without a certificate, and one whose certificate another CA signed: refused by
    nginx, and its log says why (never its token)."""
    rogue = TestCA(layout.paths.root, "rogue").issue("edge-1", server=False)
    argv, env, cwd = layout.runner.command("proxypool-gateway@.service", "edge-1")
    without = {
        k: v for k, v in env.items() if k not in ("GATEWAY_CLIENT_CERT", "GATEWAY_CLIENT_KEY")
    }
    cases = {
        "client_certificate_required": without,
        "client_certificate_invalid": {**env, "GATEWAY_CLIENT_CERT": str(rogue.cert),
                                       "GATEWAY_CLIENT_KEY": str(rogue.key)},
    }  # fmt: skip
    token = (layout.paths.etc / "gateway" / "edge-1.token").read_text().strip()
    for code, environment in cases.items():
        environment = {**environment, "GATEWAY_BIND": f"127.0.0.1:{free_port()}"}
        log = layout.paths.logs / f"refused-{code}.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(argv, cwd=cwd, env=environment, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        layout.runner.children.append(Child(f"worker ({code})", proc))
        wait_for(f"the refusal {code}", partial(said, log, code), 20, [])
        text = log.read_text()
        assert "403" in text and token not in text, text
