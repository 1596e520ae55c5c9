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


def emit_usage(event: dict[str, Any]) -> None:
    safe = {k: v for k, v in event.items() if not any(w in k.lower() for w in _FORBIDDEN)}
    logger.info("usage %s", json.dumps(safe, sort_keys=True, separators=(",", ":"), default=str))
