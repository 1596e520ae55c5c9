"""A check URL's server for the checker's tests and benchmark: real sockets on 127.0.0.1, in
a thread of its own (its own event loop), answering ``/status/<code>`` with that status,
``/slow`` never (it holds the connection), anything else 204. Optionally over TLS, with a
self-signed certificate for 127.0.0.1 (``tls_client_context()`` trusts it)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import socket
import ssl
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, written into ``folder`` (also the forwarding
    bench's nginx's, bench/gateway_forward.py)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class CheckTargetServer:
    def __init__(self, tls: bool = False) -> None:
        self.tls = tls
        self.port = 0
        self.requests = 0
        self._folder = Path(tempfile.mkdtemp())
        self._cert: Path | None = None
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def tls_client_context(self) -> ssl.SSLContext:
        assert self._cert is not None
        return ssl.create_default_context(cafile=str(self._cert))

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            self.requests += 1
            path = head.split(b" ", 2)[1].decode()
            if path == "/slow":
                await asyncio.sleep(3600)  # until the server stops (cancelled then)
            status = int(path.rsplit("/", 1)[1]) if path.startswith("/status/") else 204
            writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                         .encode())  # fmt: skip
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass  # a client that went away or sent no request: nothing to answer
        finally:
            writer.close()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        context = None
        if self.tls:
            self._cert, key = self_signed(self._folder)
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(self._cert, key)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=context, backlog=1024)
        )
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        # Stopped: every connection's handler is cancelled and closes its socket, then the
        # loop is closed, so nothing is left for the garbage collector to warn about later.
        server.close()
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.run_until_complete(server.wait_closed())
        # A closed transport shuts its socket in a callback of the loop's next turn (and
        # wait_closed may return without one): without this turn a connection open at the stop
        # would be left to the garbage collector, which warns in some later test.
        self._loop.run_until_complete(asyncio.sleep(0.01))
        self._loop.close()

    def url(self, path: str = "/check") -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> CheckTargetServer:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


@contextlib.contextmanager
def check_target(tls: bool = False) -> Iterator[CheckTargetServer]:
    with CheckTargetServer(tls) as server:
        yield server


def closed_port() -> int:
    """A loopback port nothing listens on (bound and released: connecting to it is refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
