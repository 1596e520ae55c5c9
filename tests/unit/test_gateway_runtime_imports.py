"""The gateway worker imports neither Django, nor a Redis client, nor the control plane.

A worker runs on machines that reach the control plane only over HTTPS (ARCHITECTURE.md
"gateway_runtime"): an import of ``redis`` or ``django`` there would be a dependency it must not
have, and one of ``pool_admin`` would drag in both. Each check runs in a fresh interpreter, so
what this test process has already imported does not hide an import.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import gateway_runtime

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("django", "redis", "pool_admin")
#: What a worker may use besides its own package: the domain types and the process helpers
#: the control plane shares with it (environment, redaction, batched log lines).
SHARED = ("activity", "activity.env", "activity.redact", "activity.log_batches")


def _worker_modules() -> list[str]:
    """``gateway_runtime`` and every module under it (new ones are checked as they come)."""
    found = pkgutil.walk_packages(gateway_runtime.__path__, prefix="gateway_runtime.")
    return ["gateway_runtime", *sorted(module.name for module in found)]


def _forbidden_after_importing(module: str) -> list[str]:
    script = (
        "import importlib, json, sys\n"
        f"importlib.import_module({module!r})\n"
        f"forbidden = {FORBIDDEN!r}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in forbidden)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    loaded: list[str] = json.loads(result.stdout)
    return loaded


@pytest.mark.parametrize("module", [*_worker_modules(), *SHARED])
def test_importing_it_loads_no_django_redis_or_control_plane(module: str) -> None:
    assert _forbidden_after_importing(module) == []


def test_the_check_sees_a_forbidden_import() -> None:
    """The subprocess really reports what it loaded (else the test above passes on nothing)."""
    assert "pool_admin" in _forbidden_after_importing("pool_admin.defaults")
