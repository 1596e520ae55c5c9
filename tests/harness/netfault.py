"""A TCP relay between a client and a server that can drop a reply on the floor.

Fault tests put it in front of a real Redis: `cut_next_reply()` lets the next request reach the
server (so a script commits) and then closes the client's connection instead of delivering the
answer -- the "connection died after commit, before the reply was read" case of ADR-005;
`cut_requests()` loses requests before the server sees them.
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
        self._lock = threading.Lock()
        # Per direction ("reply" server->client, "request" client->server): how many messages
        # to deliver before cutting, and how many to cut after that.
        self._plan = {"reply": [0, 0], "request": [0, 0]}
        self.cuts = 0
        self._closing = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def cut_next_reply(self) -> None:
        self.cut_replies(after=0, count=1)

    def cut_replies(self, *, after: int, count: int) -> None:
        """Deliver `after` more replies, then cut the `count` after them (they ran)."""
        with self._lock:
            self._plan["reply"] = [after, count]

    def cut_requests(self, *, after: int, count: int) -> None:
        """Deliver `after` more requests, then cut the `count` after them (they never ran)."""
        with self._lock:
            self._plan["request"] = [after, count]

    def _cut(self, direction: str) -> bool:
        with self._lock:
            plan = self._plan[direction]
            if plan[0] > 0:
                plan[0] -= 1
                return False
            if plan[1] > 0:
                plan[1] -= 1
                self.cuts += 1
                return True
            return False

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
                if self._cut("reply" if replies else "request"):
                    break  # the message is lost on the way, and the connection with it
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
