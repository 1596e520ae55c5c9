"""``python -m gateway_runtime``: run one gateway worker (docs/gateway.md "Running a worker").

Each setting is a flag or an environment variable (the flag wins). The worker's token is never
a flag (a command line is visible to every user of the machine): ``GATEWAY_TOKEN`` or a file
(``--token-file``/``GATEWAY_TOKEN_FILE``) holding it. One process is one worker with its own
token and session; run N of them (each with its own token and ports) to use N cores.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
from pathlib import Path

from gateway_runtime.control_tls import TLSConfigError, control_tls_context
from gateway_runtime.server.config import DEFAULT_DENY_PORTS, Limits
from gateway_runtime.server.worker import Bind, Worker, WorkerSettings

DEFAULT_HTTP_BIND = "127.0.0.1:8899"
#: Longest token file read.
MAX_TOKEN_BYTES = 4096


class ConfigError(Exception):
    """A setting the worker cannot start with; the message names it, never its secret."""


def _parser() -> argparse.ArgumentParser:
    env = os.environ.get
    parser = argparse.ArgumentParser(
        prog="python -m gateway_runtime",
        description="Run one gateway worker: an HTTP and SOCKS5 forward proxy serving from "
        "the snapshot the control plane assigns it.",
    )
    parser.add_argument(
        "--control-url",
        default=env("GATEWAY_CONTROL_URL"),
        help="the control plane's base URL, e.g. http://127.0.0.1:8000 (GATEWAY_CONTROL_URL)",
    )
    parser.add_argument(
        "--token-file",
        default=env("GATEWAY_TOKEN_FILE"),
        help="a file holding the worker's token (GATEWAY_TOKEN_FILE; or the "
        "token itself in GATEWAY_TOKEN)",
    )
    parser.add_argument(
        "--control-ca",
        default=env("GATEWAY_CONTROL_CA"),
        help="a PEM file of the CA the control plane's certificate must chain to "
        "(GATEWAY_CONTROL_CA; default: the system's CAs)",
    )
    parser.add_argument(
        "--client-cert",
        default=env("GATEWAY_CLIENT_CERT"),
        help="the worker's certificate (PEM) for mutual TLS with the control plane "
        "(GATEWAY_CLIENT_CERT; with --client-key)",
    )
    parser.add_argument(
        "--client-key",
        default=env("GATEWAY_CLIENT_KEY"),
        help="the worker's private key (PEM, unencrypted, not readable by others; "
        "GATEWAY_CLIENT_KEY)",
    )
    parser.add_argument(
        "--http-bind",
        default=env("GATEWAY_BIND", DEFAULT_HTTP_BIND),
        help=f"the HTTP proxy's host:port (GATEWAY_BIND, default {DEFAULT_HTTP_BIND})",
    )
    parser.add_argument(
        "--socks-bind",
        default=env("GATEWAY_SOCKS_BIND", ""),
        help="the SOCKS5 listener's host:port, empty for none (GATEWAY_SOCKS_BIND)",
    )
    parser.add_argument(
        "--metrics-bind",
        default=env("GATEWAY_METRICS_BIND", ""),
        help="/metrics, /ready and /healthz host:port, empty for none "
        "(GATEWAY_METRICS_BIND; keep it on loopback)",
    )
    defaults = Limits()
    parser.add_argument(
        "--max-connections",
        type=int,
        default=int(env("GATEWAY_MAX_CONNECTIONS", defaults.max_connections)),
        help="client connections held at once (GATEWAY_MAX_CONNECTIONS)",
    )
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=float(env("GATEWAY_CONNECT_TIMEOUT", defaults.connect_timeout)),
        help="seconds to reach an upstream proxy and its answer to CONNECT",
    )
    parser.add_argument(
        "--first-byte-timeout",
        type=float,
        default=float(env("GATEWAY_FIRST_BYTE_TIMEOUT", defaults.first_byte_timeout)),
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=float(env("GATEWAY_IDLE_TIMEOUT", defaults.idle_timeout)),
        help="seconds a kept-alive client connection may wait between requests",
    )
    parser.add_argument(
        "--tunnel-idle-timeout",
        type=float,
        default=float(env("GATEWAY_TUNNEL_IDLE_TIMEOUT", defaults.tunnel_idle_timeout)),
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=float(env("GATEWAY_DRAIN_TIMEOUT", defaults.drain_timeout)),
        help="seconds given to tunnels in flight on shutdown",
    )
    parser.add_argument(
        "--deny-ports",
        default=env("GATEWAY_DENY_PORTS", ",".join(map(str, sorted(DEFAULT_DENY_PORTS)))),
        help="target ports refused with 403, comma-separated (default: mail "
        "submission 25,465,587; empty for none)",
    )
    parser.add_argument("--log-level", default=env("GATEWAY_LOG_LEVEL", "INFO"))
    return parser


def settings_from(
    args: argparse.Namespace, environ: dict[str, str] | None = None
) -> WorkerSettings:
    environ = dict(os.environ) if environ is None else environ
    if not args.control_url:
        raise ConfigError("--control-url (or GATEWAY_CONTROL_URL) is required")
    if not str(args.control_url).startswith(("http://", "https://")):
        raise ConfigError("--control-url must be an http:// or https:// URL")
    token = _token(args.token_file, environ)
    try:
        tls = control_tls_context(args.control_ca, args.client_cert, args.client_key)
    except TLSConfigError as exc:
        raise ConfigError(str(exc)) from None
    if tls is not None and not str(args.control_url).startswith("https://"):
        raise ConfigError("--control-url must be https:// when a CA or client certificate is set")
    ports = [p.strip() for p in str(args.deny_ports).split(",") if p.strip()]
    if not all(p.isascii() and p.isdigit() for p in ports):
        raise ConfigError("--deny-ports: whole port numbers, comma-separated")
    deny = frozenset(int(p) for p in ports)
    try:
        limits = Limits(
            max_connections=args.max_connections,
            connect_timeout=args.connect_timeout,
            first_byte_timeout=args.first_byte_timeout,
            idle_timeout=args.idle_timeout,
            tunnel_idle_timeout=args.tunnel_idle_timeout,
            drain_timeout=args.drain_timeout,
            deny_ports=deny,
        )
        return WorkerSettings(
            control_url=args.control_url,
            token=token,
            http=Bind.parse(args.http_bind),
            socks=Bind.parse(args.socks_bind) if args.socks_bind else None,
            metrics=Bind.parse(args.metrics_bind) if args.metrics_bind else None,
            limits=limits,
            control_tls=tls,
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _token(path: str | None, environ: dict[str, str]) -> str:
    if path:
        try:
            with Path(path).open("rb") as handle:
                data = handle.read(MAX_TOKEN_BYTES + 1)
        except OSError as exc:
            raise ConfigError(f"cannot read the token file {path}: {exc.strerror}") from None
        if len(data) > MAX_TOKEN_BYTES:
            raise ConfigError(f"the token file {path} is longer than a token")
        token = data.decode("utf-8", "replace").strip()
    else:
        token = environ.get("GATEWAY_TOKEN", "").strip()
    if not token:
        raise ConfigError(
            "no worker token: give --token-file or GATEWAY_TOKEN "
            "(python manage.py create_worker prints one)"
        )
    if any(c.isspace() or not c.isprintable() for c in token):
        raise ConfigError("the worker token holds spaces or control characters")
    return token


async def _serve(settings: WorkerSettings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    worker = Worker(settings)
    task = asyncio.create_task(worker.run(stop))
    ready = asyncio.create_task(worker.ready.wait())
    await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
    if worker.ready.is_set():
        http = worker.bound["http"]
        print(f"gateway worker: HTTP proxy on {http}", flush=True)
        if "socks" in worker.bound:
            print(f"gateway worker: SOCKS5 on {worker.bound['socks']}", flush=True)
        if "metrics" in worker.bound:
            print(
                f"gateway worker: metrics on http://{worker.bound['metrics']}/metrics", flush=True
            )
    ready.cancel()
    # What start-up made (modules, settings, the listeners) lives as long as the process:
    # out of the collector's sight, a full collection walks only what requests made since.
    gc.freeze()
    await task


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    # One line per control-plane call would drown the worker's own lines.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        settings = settings_from(args)
    except ConfigError as exc:
        print(f"gateway worker: {exc}", file=sys.stderr)
        return 2
    try:
        import uvloop
    except ImportError:  # the project installs it; a worker runs without, only slower
        run = asyncio.run
    else:
        run = uvloop.run
    try:
        run(_serve(settings))
    except OSError as exc:  # a bind address taken or not this machine's
        print(f"gateway worker: cannot listen: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
