"""Usage events: the one narrow function every extract reports through.

For now it logs one structured line; the metrics issue will append the same event to a Redis
Stream. An event never carries a secret: callers pass IDs, counts and labels only, and
``emit_usage`` drops any key that looks like one as a last guard.
"""

from __future__ import annotations

import json
import logging
from typing import Any

logger = logging.getLogger("pool_admin.usage")

#: Words that mark a field as secret-bearing; such fields are dropped, never logged.
_FORBIDDEN = ("password", "secret", "token", "authorization", "api_key", "credential")
_encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str).encode
#: Field name -> whether it may be logged (events use a handful of fixed names).
_allowed: dict[str, bool] = {}


def _may_log(name: str) -> bool:
    allowed = _allowed.get(name)
    if allowed is None:
        allowed = not any(w in name.lower() for w in _FORBIDDEN)
        if len(_allowed) < 1_000:
            _allowed[name] = allowed
    return allowed


def emit_usage(event: dict[str, Any]) -> None:
    if not logger.isEnabledFor(logging.INFO):
        return
    safe = {k: v for k, v in event.items() if _may_log(k)}
    logger.info("usage %s", _encode(safe))
