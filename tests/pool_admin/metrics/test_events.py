"""The usage events' shapes (pool_admin/metrics/events.py): what checks fits the columns it is
written to, so PostgreSQL never refuses an event for its text."""

from __future__ import annotations

import pytest

from activity.types import LABEL_MAX_LENGTH, ProxyState
from gateway_runtime.wire.limits import OTHER
from pool_admin.config.models import (
    ClientDraws,
    ClientUsage,
    GatewayActivity,
    GatewayTraffic,
    UpstreamChecks,
    UpstreamDrops,
)
from pool_admin.metrics.events import (
    MAX_NUMBER,
    MalformedEvent,
    decode_entry,
    encode_event,
    entry_of,
)

AT_MS = 1_780_000_000_000


def _check(states: dict[str, int]) -> bytes:
    fields = {"upstream": "u1", "source": "intake", "states": states, "latency_ms": 0, "timed": 0}
    return encode_event("check", AT_MS, fields)


def test_a_checks_states_are_proxy_states_and_fit_their_column():
    width = UpstreamChecks._meta.get_field("result").max_length
    assert all(len(state.value) <= width for state in ProxyState)
    _check({state.value: 1 for state in ProxyState})
    for state in ("availablex", "a" * (width + 1), "Available"):
        with pytest.raises(MalformedEvent, match="check: bad states"):
            _check({state: 1})


@pytest.mark.parametrize(
    ("kind", "build", "column"),
    [
        (
            "extract",
            lambda code: {"client": "c1", "outcome": code, "returned": 0, "duration_ms": 1},
            ClientUsage._meta.get_field("outcome"),
        ),
        (
            "fetch",
            lambda code: {
                "upstream": "u1",
                "received": 1,
                "inserted": 0,
                "refreshed": 0,
                "available": 0,
                "dropped": {code: 1},
            },
            UpstreamDrops._meta.get_field("reason"),
        ),
    ],
)
def test_codes_are_as_long_as_their_column_and_no_longer(kind, build, column):
    width = column.max_length
    encode_event(kind, AT_MS, build("x" * width))
    with pytest.raises(MalformedEvent, match=f"{kind}: bad"):
        encode_event(kind, AT_MS, build("x" * (width + 1)))


def test_a_draws_region_is_a_vendors_label_that_fits_its_column():
    """Regions are vendors' words (Zhima's cities): an extract of one is an event, not a dead
    letter; the longest label fits ClientDraws.region."""
    width = ClientDraws._meta.get_field("region").max_length

    def extract_of(region: str) -> dict:
        draws = [["u1", region, 1, 5]]
        return {"client": "c1", "outcome": "ok", "returned": 1, "duration_ms": 1, "draws": draws}

    for region in ("广东省广州市", "United States", "r" * width):
        encode_event("extract", AT_MS, extract_of(region))
    for region in ("r" * (width + 1), "two  spaces", "bell\x07"):
        with pytest.raises(MalformedEvent, match="extract: bad draws"):
            encode_event("extract", AT_MS, extract_of(region))


def test_the_consumer_refuses_what_a_producer_would_not_send():
    """A writer past encode_event (another version, a hand-made entry) is checked again on
    reading: the bad event alone is refused, with its place in the entry."""
    good = _check({"available": 1})
    bad = good.replace(b'"available"', b'"' + b"z" * 17 + b'"')
    decoded = decode_entry({b"e": entry_of([good, bad, good])["e"]})
    assert decoded.positions == [0, 2]
    assert [(r.index, r.reason) for r in decoded.refused] == [(1, "check: bad states")]


_GATEWAY_EVENTS = {
    "gateway_tick": {"duration_ms": 12, "expired": 0, "cut_short": False},
    "gateway_ownership": {
        "group": "edge",
        "assigned": 2,
        "renewed": 0,
        "drains_begun": 1,
        "released": 0,
        "refused": 0,
    },
    "gateway_traffic": {
        "group": "edge",
        "client": "shop",
        "upstream": "acme-us",
        "requests": 10,
        "tunnels": 3,
        "bytes_up": 2_000,
        "bytes_down": 90_000,
        "failed_connect": 1,
        "failed_timeout": 0,
        "failed_upstream": 2,
        "failed_closed": 0,
    },
    "gateway_snapshots_refused": {"group": "edge", "refused": 1},
}


@pytest.mark.parametrize("kind", sorted(_GATEWAY_EVENTS))
def test_the_gateways_events_check_every_field(kind):
    good = _GATEWAY_EVENTS[kind]
    encode_event(kind, AT_MS, good)
    for name in good:
        with pytest.raises(MalformedEvent, match=f"{kind}: missing {name}"):
            encode_event(kind, AT_MS, {k: v for k, v in good.items() if k != name})
    with pytest.raises(MalformedEvent, match=f"{kind}: unknown field 'worker'"):
        encode_event(kind, AT_MS, {**good, "worker": "edge-1"})  # never per worker
    counts = [name for name, value in good.items() if type(value) is int]
    for name in counts:
        for bad in (-1, MAX_NUMBER + 1, 1.5, True, "1", None):
            with pytest.raises(MalformedEvent, match=f"{kind}: bad {name}"):
                encode_event(kind, AT_MS, {**good, name: bad})
        encode_event(kind, AT_MS, {**good, name: MAX_NUMBER})
    for name in ("group", "upstream"):
        if name not in good:
            continue
        for bad in ("", "two words", "x" * (LABEL_MAX_LENGTH + 1), "a/b", "-lead", 7, None):
            with pytest.raises(MalformedEvent, match=f"{kind}: bad {name}"):
                encode_event(kind, AT_MS, {**good, name: bad})


def test_a_ticks_cut_short_is_a_flag():
    good = _GATEWAY_EVENTS["gateway_tick"]
    encode_event("gateway_tick", AT_MS, {**good, "cut_short": True})
    for bad in (0, 1, "true", None):
        with pytest.raises(MalformedEvent, match="gateway_tick: bad cut_short"):
            encode_event("gateway_tick", AT_MS, {**good, "cut_short": bad})


def test_the_gateways_labels_fit_their_columns():
    """A group's and an upstream's names are labels; the longest fits the aggregates'."""
    columns = [(GatewayActivity, "worker_group"), (GatewayTraffic, "worker_group"),
               (GatewayTraffic, "client"), (GatewayTraffic, "upstream")]  # fmt: skip
    for model, column in columns:
        assert model._meta.get_field(column).max_length == LABEL_MAX_LENGTH
    longest = "g" * LABEL_MAX_LENGTH
    traffic = {**_GATEWAY_EVENTS["gateway_traffic"], "group": longest, "client": longest,
               "upstream": longest}  # fmt: skip
    encode_event("gateway_traffic", AT_MS, traffic)
    # The workers' OTHER (pairs past a worker's table bound) is a client and an upstream too,
    # and nothing else outside a label's pattern is.
    encode_event("gateway_traffic", AT_MS, {**traffic, "client": OTHER, "upstream": OTHER})
    for name in ("client", "upstream"):
        for bad in ("(others)", "a b", "g" * (LABEL_MAX_LENGTH + 1)):
            with pytest.raises(MalformedEvent, match=f"gateway_traffic: bad {name}"):
                encode_event("gateway_traffic", AT_MS, {**traffic, name: bad})
