"""A target web server for the gateway's tests: real sockets on 127.0.0.1 in a thread of its own,
HTTP/1.1 with kept-alive connections, optionally over TLS (self-signed for 127.0.0.1).

Paths: ``/echo`` answers a JSON body naming what arrived (method, target, headers, body
length, the connection's number), ``/chunked`` answers in chunks, ``/bytes/<n>`` answers n
bytes, ``/trickle/<n>`` n KiB at 10 KiB/s; anything else 404. ``connections`` counts the
TCP connections it accepted.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path

from tests.harness.check_target import CheckTargetServer


class HttpTarget(CheckTargetServer):
    def __init__(self, tls: bool = False) -> None:
        super().__init__(tls)
        self.connections = 0

    def client_context(self) -> ssl.SSLContext:
        return self.tls_client_context()

    @property
    def cert(self) -> Path:
        assert self._cert is not None
        return self._cert

    def url(self, path: str = "/echo") -> str:
        return super().url(path)

    def __enter__(self) -> HttpTarget:
        super().__enter__()
        return self

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0"))
                body = await reader.readexactly(length) if length else b""
                if target.endswith("/echo"):
                    payload = json.dumps(
                        {
                            "method": method,
                            "target": target,
                            "headers": headers,
                            "body": len(body),
                            "connection": number,
                        }
                    ).encode()
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload)
                    )
                elif target.endswith("/chunked"):
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                        b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
                    )
                elif "/trickle/" in target:  # n KiB, one every 0.1 s, with a length
                    chunks = int(target.rsplit("/", 1)[1])
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (chunks * 1024))
                    for _ in range(chunks):
                        writer.write(b"t" * 1024)
                        await writer.drain()
                        await asyncio.sleep(0.1)
                elif "/bytes/" in target:
                    size = int(target.rsplit("/", 1)[1])
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
                    writer.write(b"x" * size)
                else:
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            writer.close()
