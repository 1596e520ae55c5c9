"""A real gateway worker process for a test (``python -m gateway_runtime``), as its token's
worker, against the control plane on a local port: started on free ports, killed on the way
out."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

from pool_admin.localservices import free_port


@contextlib.contextmanager
def gateway_worker_process(
    control_port: int, token: str
) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, int]]]:
    """The process and its ports (``http``, ``socks``, ``metrics``); its output on a pipe."""
    ports = {"http": free_port(), "socks": free_port(), "metrics": free_port()}
    env = {**os.environ, "GATEWAY_TOKEN": token}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway_runtime", "--control-url",
         f"http://127.0.0.1:{control_port}", "--http-bind", f"127.0.0.1:{ports['http']}",
         "--socks-bind", f"127.0.0.1:{ports['socks']}",
         "--metrics-bind", f"127.0.0.1:{ports['metrics']}", "--drain-timeout", "5"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        yield proc, ports
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
