"""The systems ``bench/gateway.py --part forward`` (bench/gateway_forward.py) runs side by side,
each started as the bench runs it: the loopback nginx target, squid and pproxy chained to the
upstream tinyproxy, the bare uvloop forwarder (bare_forwarder.py), the gateway worker on its
control stand-in; the load client built; and the CPU a process tree used."""

from __future__ import annotations

import importlib.util
import os
import pwd
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT)]

from gateway_control_standin import BENCH_KEY  # noqa: E402

from pool_admin.forward_proxies import ForwardProxy, Tinyproxy, write_private  # noqa: E402
from pool_admin.localservices import forward_proxy_binary, free_port  # noqa: E402
from tests.harness.check_target import self_signed  # noqa: E402

#: pproxy's pins: 2.7.9 is the research run's; it did not start with uvloop 0.23, did on 0.21.
PPROXY_PINS = ("pproxy==2.7.9", "uvloop==0.21.0")
PPROXY_VENV = ROOT / ".run" / "bench-venv" / "pproxy"
BODY_BYTES = 1024
#: The upstream's login (ForwardProxy takes letters and digits only).
UP_USER, UP_PASSWORD = "benchup", "benchup0secret"
WORKER_TOKEN = "bench-worker-token"
CLOCK_TICK = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------- processes
class Service(ForwardProxy):
    """A server started, watched and stopped the way ForwardProxy runs tinyproxy (own session,
    a log file, ready once its port listens), with any argv: nginx, squid, pproxy, the bare
    forwarder, the worker.
    ForwardProxy's __init__ is skipped: it checks a proxy login and a Debian binary, which
    these do not all have."""

    def __init__(self, name: str, directory: Path, port: int, argv: list[str]) -> None:
        self.binary_name, self.binary = name, argv[0]
        self.directory, self.port, self._argv = directory, port, argv
        self.username = self.password = ""
        self._proc = None

    def argv(self) -> list[str]:
        return self._argv


def tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its live descendants, with the children they reaped: a
    system's whole cost, whether it runs one process, threads or helpers."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "stat").read_text()
        except OSError:  # exited between the listing and the read
            continue
        # After the command name (in parentheses, may hold spaces): state, ppid, ... utime
        # (field 14), stime, cutime, cstime.
        fields = text[text.rindex(")") + 2 :].split()
        parents[int(entry.name)] = int(fields[1])
        ticks[int(entry.name)] = sum(int(x) for x in fields[11:15])
    tree, grew = {pid}, True
    while grew:
        more = {p for p, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return sum(ticks.get(p, 0) for p in tree) / CLOCK_TICK


# ---------------------------------------------------------------------------------- setup
def nginx(directory: Path) -> tuple[Service, int]:
    """The target: a 1 KiB body on plain HTTP (the figures) and HTTPS (ready for a TLS tunnel
    row), keep-alive without a request limit. One process (no master): the target should cost
    the machine as little as it can, and nginx alone is measured to show it is not the limit."""
    base = directory / "nginx"
    (base / "www").mkdir(parents=True)
    (base / "www" / "1k").write_bytes(b"x" * BODY_BYTES)
    cert, key = self_signed(base)  # a test key for a loopback server
    port, tls_port = free_port(), free_port()
    temps = "".join(
        f"{kind}_temp_path {base}/{kind};\n" for kind in ("client_body", "proxy", "fastcgi")
    ) + "".join(f"{kind}_temp_path {base}/{kind};\n" for kind in ("uwsgi", "scgi"))
    config = base / "nginx.conf"
    config.write_text(
        f"daemon off;\nmaster_process off;\nworker_processes 1;\npid {base}/nginx.pid;\n"
        f"error_log {base}/error.log warn;\n"
        "events { worker_connections 8192; }\n"
        "http {\n"
        f"  access_log off;\n  keepalive_requests 10000000;\n  keepalive_timeout 120s;\n{temps}"
        "  default_type application/octet-stream;\n"
        f"  server {{\n    listen 127.0.0.1:{port} backlog=4096;\n"
        f"    listen 127.0.0.1:{tls_port} ssl backlog=4096;\n"
        f"    ssl_certificate {cert};\n    ssl_certificate_key {key};\n"
        f"    root {base}/www;\n  }}\n}}\n"
    )
    binary = forward_proxy_binary("nginx")
    assert binary is not None
    argv = [binary, "-p", str(base), "-e", str(base / "error.log"), "-c", str(config)]
    return Service("nginx", base, port, argv), tls_port


def squid(directory: Path, upstream: Tinyproxy) -> Service:
    """squid as a child of tinyproxy: every request and CONNECT to the parent with its login,
    nothing cached, nothing logged per request."""
    base = directory / "squid"
    base.mkdir()
    # squid drops to its own user: its log and PID file live in a folder that user owns.
    user = pwd.getpwnam("proxy")
    os.chown(base, user.pw_uid, user.pw_gid)
    port = free_port()
    config = base / "squid.conf"
    write_private(  # the upstream's password is in it
        config,
        f"http_port 127.0.0.1:{port}\n"
        f"pid_filename {base}/squid.pid\ncache_log {base}/cache.log\ncoredump_dir {base}\n"
        "access_log none\ncache deny all\ncache_mem 8 MB\nnetdb_filename none\n"
        f"cache_peer 127.0.0.1 parent {upstream.port} 0 no-query no-digest default "
        f"login={upstream.username}:{upstream.password} name=tinyproxy\n"
        "never_direct allow all\nhttp_access allow all\nvia off\nforwarded_for delete\n"
        "max_filedescriptors 8192\nshutdown_lifetime 1 seconds\n",
    )
    binary = forward_proxy_binary("squid")
    assert binary is not None
    return Service("squid", base, port, [binary, "-N", "-f", str(config)])


def bare(directory: Path, upstream: Tinyproxy) -> Service:
    """bench/bare_forwarder.py on this interpreter (uvloop is a project dependency), chained to
    tinyproxy with its login; it asks the client for none."""
    base = directory / "bare"
    base.mkdir()
    port = free_port()
    argv = [sys.executable, str(ROOT / "bench" / "bare_forwarder.py"), str(port), "127.0.0.1"]
    argv += [str(upstream.port), upstream.username, upstream.password]
    return Service("bare_forwarder", base, port, argv)


def pproxy(directory: Path, upstream: Tinyproxy) -> Service:
    """pproxy from its own venv (made once, kept under .run/bench-venv), chained to tinyproxy;
    pproxy reads a login after ``#`` in its URLs (not ``user:pass@``)."""
    binary = PPROXY_VENV / "bin" / "pproxy"
    if not binary.exists():
        print(f"- installing {' '.join(PPROXY_PINS)} into {PPROXY_VENV} (not a project dependency)")
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(PPROXY_VENV)], check=True)
        subprocess.run(
            [str(PPROXY_VENV / "bin" / "pip"), "install", "--quiet", *PPROXY_PINS], check=True
        )
    port = free_port()
    base = directory / "pproxy"
    base.mkdir()
    argv = [
        str(binary),
        "-l",
        f"http://127.0.0.1:{port}#bench:{BENCH_KEY}",
        "-r",
        f"http://127.0.0.1:{upstream.port}#{upstream.username}:{upstream.password}",
    ]
    return Service("pproxy", base, port, argv)


def worker(
    directory: Path, control_url: str, tree: Path | None = None
) -> tuple[Service | None, str]:
    """The gateway worker on its control stand-in, once it answers /ready; (None, why) when it
    cannot run here (not built yet, or it failed to become ready). ``tree``: run the worker of
    that checkout instead (its directory first on PYTHONPATH, ahead of the editable install)."""
    if tree is None and importlib.util.find_spec("gateway_runtime.__main__") is None:
        return None, "gateway_runtime has no __main__ yet (the worker is not on this branch)"
    base = directory / ("worker" if tree is None else "worker-before")
    base.mkdir()
    token_file = base / "token"
    write_private(token_file, WORKER_TOKEN)
    port, socks, metrics = free_port(), free_port(), free_port()
    before = [] if tree is None else ["env", f"PYTHONPATH={tree}"]
    argv = [
        *before,
        sys.executable,
        "-m",
        "gateway_runtime",
        "--control-url",
        control_url,
        "--token-file",
        str(token_file),
        "--http-bind",
        f"127.0.0.1:{port}",
        "--socks-bind",
        f"127.0.0.1:{socks}",
        "--metrics-bind",
        f"127.0.0.1:{metrics}",
    ]
    service = Service("gateway_runtime", base, port, argv)
    try:
        service.start(timeout=30)
    except RuntimeError as exc:
        return None, f"the worker did not start: {exc}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/ready", timeout=2) as answer:
                if answer.status == 200:
                    return service, ""
        except OSError:  # not listening yet, or 503 until it serves a snapshot
            pass
        time.sleep(0.2)
    tail = service.logfile.read_text(errors="replace")[-1500:]
    service.stop()
    return None, f"the worker did not answer 200 on /ready within 30 s; its log ends:\n{tail}"


def compile_client(directory: Path) -> Path:
    binary = directory / "loadclient"
    source = ROOT / "bench" / "loadclient.c"
    argv = ["gcc", "-O2", "-Wall", "-o", str(binary), str(source), "-lssl", "-lcrypto"]
    subprocess.run(argv, check=True)
    return binary
