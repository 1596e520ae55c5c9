"""The gateway's wire shape: every bound of a snapshot, report and ACK is refused with a typed
error, before the document is read where it can be; the bounds admit what the pool accepts."""

from __future__ import annotations

import json

import pytest

from activity import _checks
from activity import types as pool_types
from activity._validation import common as pool_common
from activity._validation import upsert as pool_upsert
from activity.hosts import MAX_HOST_LENGTH
from activity.labels import MAX_LABEL
from gateway_runtime.wire import (
    TRAFFIC_COUNTS,
    ClientTraffic,
    ReportEntry,
    RuntimeReportBody,
    SnapshotAck,
    WireBoundError,
    decode_ack,
    decode_report,
    decode_snapshot,
    encode_ack,
    encode_report,
    encode_snapshot,
    limits,
    make_verifier,
)
from tests.unit.wire_documents import (
    PASSWORD,
    assert_refused,
    refusal,
    report,
    set_at,
    snapshot,
    tree_of,
)

# --- bounds ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "maximum"),
    [
        ("proxies", limits.MAX_PROXIES),
        ("credentials", limits.MAX_PROXIES),
        ("clients", limits.MAX_CLIENTS),
    ],
)
def test_a_snapshot_over_an_entry_bound_is_refused_before_its_entries_are_read(
    field: str, maximum: int
) -> None:
    assert_refused(refusal(set_at([field], [{}] * (maximum + 1)), WireBoundError), field)


@pytest.mark.parametrize(
    ("field", "maximum"),
    [("entries", limits.MAX_REPORT_ENTRIES), ("traffic", limits.MAX_TRAFFIC_ENTRIES)],
)
def test_a_report_over_an_entry_bound_is_refused(field: str, maximum: int) -> None:
    tree = tree_of(encode_report(report()))
    tree[field] = [{}] * (maximum + 1)
    with pytest.raises(WireBoundError) as caught:
        decode_report(json.dumps(tree).encode())
    assert_refused(caught.value, field)


@pytest.mark.parametrize(
    ("decode", "maximum", "document"),
    [
        (decode_snapshot, limits.MAX_SNAPSHOT_BYTES, "snapshot"),
        (decode_report, limits.MAX_REPORT_BYTES, "report"),
        (decode_ack, limits.MAX_ACK_BYTES, "ack"),
    ],
)
def test_a_document_over_its_byte_bound_is_refused_before_parsing(
    decode, maximum, document
) -> None:
    with pytest.raises(WireBoundError) as caught:
        decode(b"{" + b" " * maximum)  # not JSON either: the length is checked first
    assert_refused(caught.value, document)


def test_encoding_over_a_byte_bound_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MAX_SNAPSHOT_BYTES", "MAX_REPORT_BYTES", "MAX_ACK_BYTES"):
        monkeypatch.setattr(limits, name, 64)
    with pytest.raises(WireBoundError, match=r"^snapshot: "):
        encode_snapshot(snapshot())
    with pytest.raises(WireBoundError, match=r"^report: "):
        encode_report(report())
    with pytest.raises(WireBoundError, match=r"^ack: "):
        encode_ack(SnapshotAck(1, 1, "0" * 64))


def test_encoding_over_an_entry_bound_is_refused() -> None:
    entries = tuple(ReportEntry(f"p{i}", 1, 1, 0) for i in range(limits.MAX_REPORT_ENTRIES + 1))
    with pytest.raises(WireBoundError, match=r"^entries: "):
        encode_report(report(entries=entries))


def test_the_largest_report_fits_its_byte_bound() -> None:
    """Every entry a full snapshot can have, with 100-character IDs and counters at their
    maximum, and a full traffic table (64-character names, every figure at its maximum): the
    worker can always send its complete counts."""
    top = limits.MAX_COUNTER
    entries = tuple(
        ReportEntry(f"{i:0100d}", top, limits.MAX_CONCURRENCY, limits.MAX_CONCURRENCY)
        for i in range(limits.MAX_REPORT_ENTRIES)
    )
    traffic = tuple(
        ClientTraffic(f"{i:064d}", f"u{i:063d}", **dict.fromkeys(TRAFFIC_COUNTS, top))
        for i in range(limits.MAX_TRAFFIC_ENTRIES)
    )
    body = RuntimeReportBody(top, top, top, entries, traffic, refused_snapshots=top)
    assert decode_report(encode_report(body)) == body


_LONG = "x" * (limits.MAX_TEXT + 1)


@pytest.mark.parametrize(
    ("path", "change"),
    [
        ("proxies[0].proxy_id", lambda t: t["proxies"][0].update(proxy_id=_LONG)),
        ("proxies[0].host", lambda t: t["proxies"][0].update(host="h" * (limits.MAX_HOST + 1))),
        (
            "proxies[0].region",
            lambda t: t["proxies"][0].update(region="r" * (limits.MAX_LABEL + 1)),
        ),
        (
            "proxies[0].carrier",
            lambda t: t["proxies"][0].update(carrier="c" * (limits.MAX_LABEL + 1)),
        ),
        (
            "proxies[0].upstream",
            lambda t: t["proxies"][0].update(upstream="u" * (limits.MAX_NAME + 1)),
        ),
        (
            "proxies[0].labels",
            lambda t: t["proxies"][0].update(
                labels={f"k{i}": "v" for i in range(limits.MAX_LABELS + 1)}
            ),
        ),
        ("proxies[0].labels key", lambda t: t["proxies"][0]["labels"].update({_LONG: "v"})),
        ("proxies[0].labels.pool", lambda t: t["proxies"][0]["labels"].update(pool=_LONG)),
        ("proxies[0].credential_ref", lambda t: t["proxies"][0].update(credential_ref=_LONG)),
        ("credentials[0].ref", lambda t: t["credentials"][0].update(ref=_LONG)),
        ("credentials[0].username", lambda t: t["credentials"][0].update(username=_LONG)),
        (
            "credentials[0].password",
            lambda t: t["credentials"][0].update(
                password=PASSWORD * (limits.MAX_TEXT // len(PASSWORD) + 1)
            ),
        ),
        ("clients[0].name", lambda t: t["clients"][0].update(name="n" * (limits.MAX_NAME + 1))),
        (
            "clients[0].allowed_upstreams",
            lambda t: t["clients"][0].update(
                allowed_upstreams=[f"u{i:03d}" for i in range(limits.MAX_ALLOWED + 1)]
            ),
        ),
        (
            "clients[0].verifiers",
            lambda t: t["clients"][0].update(
                verifiers=[
                    make_verifier(f"key{i}", b"s" * 16) for i in range(limits.MAX_CLIENT_KEYS + 1)
                ]
            ),
        ),
        (
            "clients[0].allowed_regions[0]",
            lambda t: t["clients"][0].update(allowed_regions=["r" * (limits.MAX_LABEL + 1)]),
        ),
    ],
)
def test_text_and_list_bounds_are_refused(path: str, change) -> None:
    assert_refused(refusal(change, WireBoundError), path)


def test_the_limits_admit_what_the_pool_accepts() -> None:
    assert limits.PROTOCOLS == pool_types.PROTOCOLS
    assert limits.MAX_COUNTER == _checks.MAX_COUNTER
    assert limits.MAX_MS == _checks.MAX_MS
    assert limits.NAME_PATTERN == _checks.LABEL_PATTERN
    assert limits.MAX_NAME == _checks.LABEL_MAX_LENGTH
    assert pool_types.PoolOptions().max_text <= limits.MAX_TEXT
    assert limits.MAX_HOST >= MAX_HOST_LENGTH
    assert limits.MAX_LABEL >= MAX_LABEL
    assert limits.MAX_LABELS >= pool_upsert._MAX_LABELS
    assert limits.MAX_CONCURRENCY >= pool_common.MAX_CONCURRENCY
    assert limits.MAX_ALLOWED >= pool_types.MAX_FILTER_VALUES
    assert limits.MAX_REPORT_ENTRIES >= limits.MAX_PROXIES
