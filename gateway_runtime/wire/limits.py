"""The wire's stated limits. A document over one is refused whole (``WireBoundError``): the
byte length is checked before any parsing, the entry counts before any entry is read.

Each limit admits whatever the activity pool itself accepts (``tests/unit/test_wire.py`` holds
them to the pool's constants), so a snapshot built from the pool never fails on the wire for
a value the pool took in.
"""

from __future__ import annotations

#: The one format this code reads and writes (the documents' top-level ``"wire"``).
WIRE_VERSION = 1

PROTOCOLS = frozenset({"http", "https", "socks4", "socks5"})

MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024
MAX_PROXIES = 20_000
#: Gateway clients per snapshot.
MAX_CLIENTS = 10_000
#: A report is sent every few seconds and holds every proxy the worker counts, so it is sized
#: for the largest snapshot: 20,000 entries with proxy IDs of up to 100 ASCII characters and a
#: full traffic table with 64-character names and every number at MAX_COUNTER fit (about
#: 3.5 MB and 0.4 MB: the tests build that report).
MAX_REPORT_BYTES = 4 * 1024 * 1024
MAX_REPORT_ENTRIES = 20_000
#: (client, upstream) pairs in a report's traffic table. A worker with more pairs to report
#: sends them over its next reports (gateway_runtime/traffic.py keeps the rest, nothing lost).
MAX_TRAFFIC_ENTRIES = 1_000
#: The client (or upstream) name a worker counts traffic under once its table of pairs is full
#: (gateway_runtime/traffic.py): not a token, so no API client or upstream can have it.
OTHER = "(other)"
MAX_ACK_BYTES = 4 * 1024

#: IDs (proxy, credential reference), label keys and values, usernames and passwords: the
#: pool's ``PoolOptions.max_text``.
MAX_TEXT = 256
#: A host name (RFC 1035's 253 characters).
MAX_HOST = 253
#: A region or carrier as vendors write it (``activity.labels.MAX_LABEL``).
MAX_LABEL = 64
#: Labels per proxy.
MAX_LABELS = 32
#: Values per allowed-upstreams, -regions or -protocols list (``activity.types.MAX_FILTER_VALUES``).
MAX_ALLOWED = 64
#: Upstream IDs and client names are tokens of the pool's key names (``activity._checks``).
MAX_NAME = 64
NAME_PATTERN = rf"[A-Za-z0-9][A-Za-z0-9._:@+-]{{0,{MAX_NAME - 1}}}"

#: Largest version, epoch, sequence or counter: what Redis's Lua JSON keeps exactly.
MAX_COUNTER = 10**14 - 1
#: Latest instant, in milliseconds since the epoch.
MAX_MS = 10**14 - 1
#: Most connections one proxy may declare or one report entry count.
MAX_CONCURRENCY = 100_000
#: Verifiers per gateway client: its active API keys (more than one while keys are rotated).
MAX_CLIENT_KEYS = 16
#: A gateway client's limits.
MAX_CLIENT_CONNECTIONS = 1_000_000
MAX_CLIENT_RPS = 100_000
#: A worker's maximum staleness, in seconds.
MAX_STALENESS_S = 86_400
