"""What RedisPool's Lua operations take and answer, in Python: the arguments it encodes and the
replies it decodes into the pool's types. Formats only; which script takes what is in ``lua/``.
"""

from __future__ import annotations

from typing import Any

import orjson

from activity import _validation as v
from activity._time import from_ms
from activity.inspection import ProxyDetail, ProxySummary, username_hint
from activity.types import (
    Assignment,
    DrainTicket,
    DueCheck,
    ExpiredTally,
    ExtractedProxy,
    HeldProxy,
    ProxyState,
    RuntimeEntry,
    RuntimeView,
    SnapshotRef,
    WorkerSession,
)


def quota_arg(quota: v.PreparedQuota | None) -> str:
    """extract.lua's and charge_call.lua's quota argument ("" for none)."""
    if quota is None:
        return ""
    return (
        f'{{"calls":{quota.calls},"call_window":{quota.call_window_ms},'
        f'"proxies":{quota.proxies},"proxy_window":{quota.proxy_window_ms}}}'
    )


def as_list(value: Any) -> list[Any]:
    # cjson encodes an empty Lua table as {}: an empty list for us.
    return value if isinstance(value, list) else []


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# The record's static part, a JSON array in this order, is encoded here once and then stored
# and handed back verbatim: Lua never spends time on JSON for it (docs/PERFORMANCE.md).
_STATIC = ("id", "u", "k", "h", "p", "pr", "r", "c", "m", "e", "uu", "f", "un", "pw", "lb")
_AT = {name: index for index, name in enumerate(_STATIC)}


def expired_tally(reply: dict[str, Any]) -> dict[str, ExpiredTally]:
    """sweep.lua's tally, {"<upstream>|used": n, "<upstream>|unused": n}, by upstream."""
    counts: dict[str, list[int]] = {}
    for name, n in reply.items():
        upstream, _, kind = str(name).rpartition("|")
        counts.setdefault(upstream, [0, 0])[0 if kind == "used" else 1] += int(n)
    return {u: ExpiredTally(used, unused) for u, (used, unused) in sorted(counts.items())}


def candidate(c: v.PreparedProxy) -> list[object]:
    """What upsert.lua reads of a candidate."""
    return [
        c.proxy_id,
        c.key_digest,
        c.protocol,
        c.region_key,  # the indexes and the hot record hold the matching form
        c.carrier_key,
        c.max_concurrency,
        c.expires_ms,
        c.usable_ms,
    ]


def static_record(c: v.PreparedProxy, batch: v.PreparedBatch) -> bytes:
    """The record's static JSON, stored verbatim and handed back by extract (see _AT)."""
    return orjson.dumps(
        [
            c.proxy_id,
            batch.upstream_id,
            c.key_digest,
            c.host,
            c.port,
            c.protocol,
            c.region,
            c.carrier,
            c.max_concurrency,
            c.expires_ms,
            c.usable_ms,
            batch.fetched_ms,
            c.username,
            c.password,
            c.labels,
        ]
    )


def extracted(p: list[Any]) -> ExtractedProxy:
    return ExtractedProxy(
        proxy_id=p[_AT["id"]],
        upstream_id=p[_AT["u"]],
        host=p[_AT["h"]],
        port=int(p[_AT["p"]]),
        protocol=p[_AT["pr"]],
        region=p[_AT["r"]],
        carrier=p[_AT["c"]],
        expires_at=from_ms(int(p[_AT["e"]])),
        usable_until=from_ms(int(p[_AT["uu"]])),
        username=p[_AT["un"]],
        password=p[_AT["pw"]],
        labels={str(k): str(val) for k, val in p[_AT["lb"]]},
        fetched_at=from_ms(int(p[_AT["f"]])),
    )


def held_proxy(state: str, static_json: str) -> HeldProxy:
    """worker_assignments.lua's view of a held proxy: its hot state and its static JSON."""
    p = orjson.loads(static_json)
    return HeldProxy(extracted(p), ProxyState(state), int(p[_AT["m"]]))


def proxy_summary(
    state: str,
    checked_ms: int | None,
    extracted_by: str | None,
    worker_id: str | None,
    p: list[Any],
) -> ProxySummary:
    """A browse or detail row: the hot fields browse.lua read, and the static JSON (whose
    password is dropped here: a summary never holds one)."""
    return ProxySummary(
        proxy_id=p[_AT["id"]],
        upstream_id=p[_AT["u"]],
        state=ProxyState(state),
        protocol=p[_AT["pr"]],
        region=p[_AT["r"]],
        carrier=p[_AT["c"]],
        host=p[_AT["h"]],
        port=int(p[_AT["p"]]),
        expires_at=from_ms(int(p[_AT["e"]])),
        usable_until=from_ms(int(p[_AT["uu"]])),
        fetched_at=from_ms(int(p[_AT["f"]])),
        checked_at=None if checked_ms is None else from_ms(int(checked_ms)),
        extracted_by=extracted_by,
        worker_id=worker_id,
        username_hint=username_hint(p[_AT["un"]]),
    )


def detail_of(reply: list[Any]) -> ProxyDetail:
    state, checked, extracted_by, owner, health, static = reply
    success, latency, failure = str(health).split("|", 2)
    p = static
    return ProxyDetail(
        summary=proxy_summary(state, checked, extracted_by, owner and owner["w"], p),
        max_concurrency=int(p[_AT["m"]]),
        labels={str(k): str(val) for k, val in p[_AT["lb"]]},
        last_success_at=from_ms(int(success)) if success else None,
        latency_ms=int(latency) if latency else None,
        failure_reason=failure or None,
        assignment=None
        if not owner
        else Assignment(
            p[_AT["id"]], owner["w"], int(owner["e"]), from_ms(int(owner["l"])), bool(owner["d"])
        ),
    )


def due_check(state: str, checked_ms: int | None, p: list[Any]) -> DueCheck:
    return DueCheck(
        proxy_id=p[_AT["id"]],
        upstream_id=p[_AT["u"]],
        state=ProxyState(state),
        host=p[_AT["h"]],
        port=int(p[_AT["p"]]),
        protocol=p[_AT["pr"]],
        checked_at=None if checked_ms is None else from_ms(int(checked_ms)),
        usable_until=from_ms(int(p[_AT["uu"]])),
        username=p[_AT["un"]],
        password=p[_AT["pw"]],
    )


def assignment(a: dict[str, Any]) -> Assignment:
    return Assignment(a["id"], a["w"], int(a["e"]), from_ms(int(a["l"])), bool(a["d"]))


def snapshot_ref_of(value: Any) -> SnapshotRef | None:
    if not isinstance(value, dict):
        return None
    return SnapshotRef(int(value["v"]), int(value["e"]), str(value["c"]))


def session(worker_id: str, s: dict[str, Any]) -> WorkerSession:
    return WorkerSession(
        worker_id,
        s["sid"],
        int(s["g"]),
        from_ms(int(s["x"])),
        snapshot_ref_of(s.get("iss")),
        snapshot_ref_of(s.get("ack")),
    )


def drain_ticket(t: dict[str, Any]) -> DrainTicket:
    snapshot = None
    if t.get("sv") is not None:
        snapshot = SnapshotRef(int(t["sv"]), int(t["se"]), str(t["sc"]))
    began = None if t.get("at") is None else from_ms(int(t["at"]))
    return DrainTicket(t["id"], t["w"], int(t["ae"]), int(t["re"]), snapshot, began)


def runtime_view(worker_id: str, rt: dict[str, Any]) -> RuntimeView:
    entries = tuple(
        sorted(
            (
                RuntimeEntry(e[0], int(e[1]), int(e[2]), int(e[3]), bool(e[4]))
                for e in as_dict(rt["en"]).values()
            ),
            key=lambda e: e.proxy_id,
        )
    )
    return RuntimeView(
        worker_id,
        rt["sid"],
        int(rt["seq"]),
        int(rt["sv"]),
        int(rt["ep"]),
        entries,
        from_ms(int(rt["x"])),
        None if rt.get("at") is None else from_ms(int(rt["at"])),
    )
