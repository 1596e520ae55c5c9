"""Reading the usage stream's new entries, with the entries it trimmed unread told once.

``read_new`` runs read_new.lua (why a script: its header): the gap between the group's last
delivered entry and the stream's first, if any, is counted into the lost-entries hash
(``upkeep.lost_key``) and the group moved past it with its read counter exact, then up to
``count`` new entries are read, all in one atomic step. Only when that finds nothing does the
consumer block for new ones (``XREADGROUP ... BLOCK``): a caught-up group cannot fall behind
the stream's first entry in between.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import redis

from pool_admin.metrics.upkeep import lost_key

logger = logging.getLogger(__name__)

_SOURCE = (Path(__file__).with_name("read_new.lua")).read_text()

Entry = tuple[bytes, dict[bytes, bytes]]
_script: Any = None


def read_new(
    client: redis.Redis, stream: str, group: str, consumer: str, count: int, block_ms: int
) -> list[Entry]:
    """Up to ``count`` new entries for ``consumer``; blocks at most ``block_ms`` when none."""
    global _script
    if _script is None:
        _script = client.register_script(_SOURCE)  # EVALSHA, loading the script when missing
    lost, raw = _script(keys=[stream, lost_key(stream)], args=[group, consumer, count],
                        client=client)  # fmt: skip
    if lost:
        logger.error("metrics stream %s: %s entries were trimmed before any consumer read them "
                     "(the consumers were behind by more than METRICS_STREAM_MAXLEN entries): "
                     "their events are not in the aggregates", stream,
                     "some" if lost < 0 else lost)  # fmt: skip
    entries = [(raw_id, _fields(flat)) for raw_id, flat in raw]
    if entries:
        return entries
    reply: Any = client.xreadgroup(group, consumer, {stream: ">"}, count=count, block=block_ms)
    return reply[0][1] if reply else []


def _fields(flat: list[bytes]) -> dict[bytes, bytes]:
    return {flat[i]: flat[i + 1] for i in range(0, len(flat) - 1, 2)}
