"""A TCP relay between a client and a server that can drop a reply on the floor.

Fault tests put it in front of a real Redis: `cut_next_reply()` lets the next request reach the
server (so a script commits) and then closes the client's connection instead of delivering the
answer -- the "connection died after commit, before the reply was read" case of ADR-005.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class CuttingRelay:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self._target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._armed = threading.Event()
        self.cuts = 0
        self._closing = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def cut_next_reply(self) -> None:
        self._armed.set()

    def close(self) -> None:
        self._closing = True
        for sock in [self._listener, *self._sockets]:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._target)
            self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, replies: bool) -> None:
        try:
            while data := src.recv(65536):
                if replies and self._armed.is_set():
                    self._armed.clear()
                    self.cuts += 1
                    break  # the server answered; the client never hears it
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
