"""The gateway's wire shape (gateway_runtime/wire): what one side encodes the other decodes to
the same value; the checksum covers every field and nothing else; every bound and every
malformed input is refused with a typed error naming the field path and no secret."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from activity import _checks
from activity import types as pool_types
from activity._validation import common as pool_common
from activity._validation import upsert as pool_upsert
from activity.hosts import MAX_HOST_LENGTH
from activity.labels import MAX_LABEL
from gateway_runtime.wire import (
    WIRE_VERSION,
    Credential,
    GatewayClient,
    ReportEntry,
    RuntimeReportBody,
    Snapshot,
    SnapshotAck,
    SnapshotProxy,
    UpstreamTraffic,
    WireBoundError,
    WireChecksumError,
    WireError,
    WireFormatError,
    WireVersionError,
    decode_ack,
    decode_report,
    decode_snapshot,
    encode_ack,
    encode_report,
    encode_snapshot,
    limits,
    make_verifier,
    new_salt,
    seal_snapshot,
    verify,
)

NOW = datetime(2026, 7, 29, 12, 0, tzinfo=UTC)
KEY = "pp_0123456789ab_" + "k" * 43
PASSWORD = "hunter2-Secret"
VERIFIER = make_verifier(KEY, b"s" * 16)


def proxy(proxy_id: str = "p1", **changes: object) -> SnapshotProxy:
    values: dict[str, object] = {
        "proxy_id": proxy_id,
        "host": "10.0.0.1",
        "port": 8080,
        "protocol": "http",
        "region": "US",
        "carrier": None,
        "upstream": "u1",
        "labels": {"pool": "a", "city": "广州"},
        "max_concurrency": 4,
        "lease_expires_at": NOW + timedelta(seconds=30),
        "usable_until": NOW + timedelta(seconds=60),
        "credential_ref": "c1",
    }
    return SnapshotProxy(**{**values, **changes})


def client(name: str = "demo", **changes: object) -> GatewayClient:
    values: dict[str, object] = {
        "name": name,
        "verifier": VERIFIER,
        "max_connections": 100,
        "requests_per_second": 50,
        "allowed_upstreams": frozenset({"u1", "u2"}),
        "allowed_regions": frozenset({"US", "cn-gd"}),
        "allowed_protocols": frozenset({"http"}),
    }
    return GatewayClient(**{**values, **changes})


def snapshot(**changes: object) -> Snapshot:
    values: dict[str, object] = {
        "version": 7,
        "epoch": 42,
        "issued_at": NOW,
        "max_staleness": timedelta(seconds=30),
        "proxies": (proxy("p1"), proxy("p2", credential_ref=None, protocol="socks5")),
        "credentials": (Credential("c1", "user", PASSWORD),),
        "clients": (client(),),
    }
    return Snapshot(**{**values, **changes})


def report(**changes: object) -> RuntimeReportBody:
    values: dict[str, object] = {
        "report_sequence": 3,
        "snapshot_version": 7,
        "epoch": 42,
        "entries": (ReportEntry("p1", 40, 2, 1),),
        "traffic": (UpstreamTraffic("u1", 10, 1_000, 20_000, 1),),
    }
    return RuntimeReportBody(**{**values, **changes})


def tree_of(data: bytes) -> dict:
    return json.loads(data)


def resealed(tree: dict) -> bytes:
    """``tree`` encoded with the checksum its content has, so a decode fails on the field."""
    content = {k: v for k, v in tree.items() if k != "checksum"}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    tree = {**tree, "checksum": hashlib.sha256(canonical.encode()).hexdigest()}
    return json.dumps(tree).encode()


def refusal(change: Callable[[dict], None], error: type[WireError]) -> WireError:
    """What decoding the sample snapshot raises once ``change`` has changed it (and it is
    resealed, so the refusal is the change's, not the checksum's)."""
    tree = tree_of(encode_snapshot(snapshot()))
    change(tree)
    with pytest.raises(error) as caught:
        decode_snapshot(resealed(tree))
    return caught.value


def assert_refused(error: WireError, path: str) -> None:
    message = str(error)
    assert message.startswith(f"{path}: "), message
    for secret in (PASSWORD, VERIFIER, VERIFIER.split("$")[-1], KEY):
        assert secret not in message


# --- generated documents ------------------------------------------------------------------

_ids = st.text(st.characters(categories=("L", "M", "N", "P", "S")), min_size=1, max_size=12)
_names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:@+-]{0,12}", fullmatch=True)
_regions = st.text(st.characters(categories=("L", "N", "Zs")), min_size=1, max_size=12).filter(
    str.isprintable
)
_counters = st.integers(0, limits.MAX_COUNTER)
_instants = st.integers(0, limits.MAX_MS).map(
    lambda ms: datetime.fromtimestamp(0, UTC) + ms * timedelta(milliseconds=1)
)
_protocols = st.sampled_from(sorted(limits.PROTOCOLS))
_printable = st.text(st.characters(categories=("L", "N", "P", "S", "Zs")), max_size=20).filter(
    str.isprintable
)


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    ids = draw(st.lists(_ids, unique=True, max_size=6))
    refs = draw(st.lists(_ids, unique=True, max_size=3))
    proxies = tuple(
        SnapshotProxy(
            proxy_id=pid,
            host=draw(_ids),
            port=draw(st.integers(1, 65_535)),
            protocol=draw(_protocols),
            region=draw(st.none() | _regions),
            carrier=draw(st.none() | _regions),
            upstream=draw(_names),
            labels=draw(st.dictionaries(_ids, _printable, max_size=3)),
            max_concurrency=draw(st.integers(1, limits.MAX_CONCURRENCY)),
            lease_expires_at=draw(_instants),
            usable_until=draw(_instants),
            credential_ref=draw(st.none() | st.sampled_from(refs)) if refs else None,
        )
        for pid in ids
    )
    named = {p.credential_ref for p in proxies}
    credentials = tuple(
        Credential(ref, draw(_regions), draw(_printable)) for ref in refs if ref in named
    )
    clients = tuple(
        GatewayClient(
            name=name,
            verifier=make_verifier(draw(_ids), draw(st.binary(min_size=16, max_size=64))),
            max_connections=draw(st.integers(1, limits.MAX_CLIENT_CONNECTIONS)),
            requests_per_second=draw(st.integers(1, limits.MAX_CLIENT_RPS)),
            allowed_upstreams=draw(st.frozensets(_names, max_size=3)),
            allowed_regions=draw(st.frozensets(_regions, max_size=3)),
            allowed_protocols=draw(st.frozensets(_protocols)),
        )
        for name in draw(st.lists(_names, unique=True, max_size=3))
    )
    return Snapshot(
        version=draw(st.integers(1, limits.MAX_COUNTER)),
        epoch=draw(_counters),
        issued_at=draw(_instants),
        max_staleness=timedelta(seconds=draw(st.integers(1, limits.MAX_STALENESS_S))),
        proxies=proxies,
        credentials=credentials,
        clients=clients,
    )


reports = st.builds(
    RuntimeReportBody,
    report_sequence=st.integers(1, limits.MAX_COUNTER),
    snapshot_version=_counters,
    epoch=_counters,
    entries=st.lists(
        st.builds(
            ReportEntry,
            proxy_id=_ids,
            epoch=_counters,
            active=st.integers(0, limits.MAX_CONCURRENCY),
            reserved=st.integers(0, limits.MAX_CONCURRENCY),
        ),
        unique_by=lambda e: e.proxy_id,
        max_size=5,
    ).map(tuple),
    traffic=st.lists(
        st.builds(
            UpstreamTraffic,
            upstream=_names,
            requests=_counters,
            bytes_up=_counters,
            bytes_down=_counters,
            errors=_counters,
        ),
        unique_by=lambda u: u.upstream,
        max_size=3,
    ).map(tuple),
)
acks = st.builds(
    SnapshotAck,
    version=st.integers(1, limits.MAX_COUNTER),
    epoch=_counters,
    checksum=st.from_regex(r"[0-9a-f]{64}", fullmatch=True),
)


# --- round trips --------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(snapshots())
def test_a_snapshot_decodes_to_what_was_encoded(original: Snapshot) -> None:
    sealed = seal_snapshot(original)
    decoded = decode_snapshot(sealed.data)
    assert decoded == dataclasses.replace(original, checksum=sealed.checksum)
    assert decoded == sealed.snapshot
    assert encode_snapshot(decoded) == sealed.data
    assert decoded.ack() == SnapshotAck(original.version, original.epoch, sealed.checksum)


@settings(max_examples=150, deadline=None)
@given(reports)
def test_a_report_decodes_to_what_was_encoded(original: RuntimeReportBody) -> None:
    assert decode_report(encode_report(original)) == original


@settings(max_examples=50, deadline=None)
@given(acks)
def test_an_ack_decodes_to_what_was_encoded(original: SnapshotAck) -> None:
    assert decode_ack(encode_ack(original)) == original


def test_the_encoding_is_canonical_json() -> None:
    data = encode_snapshot(snapshot())
    tree = tree_of(data)
    assert tree["wire"] == WIRE_VERSION == 1
    assert (
        data == json.dumps(tree, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    )
    assert "广州".encode() in data  # UTF-8, not \u escapes
    assert tree["issued_at_ms"] == 1_785_326_400_000
    assert tree["max_staleness_s"] == 30
    content = {k: v for k, v in tree.items() if k != "checksum"}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert tree["checksum"] == hashlib.sha256(canonical.encode()).hexdigest()


def test_times_travel_as_milliseconds_floored() -> None:
    finer = snapshot(issued_at=NOW + timedelta(microseconds=1_999))
    assert decode_snapshot(encode_snapshot(finer)).issued_at == NOW + timedelta(milliseconds=1)


# --- the checksum ---------------------------------------------------------------------------


def test_the_checksum_is_independent_of_the_order_values_were_given_in() -> None:
    one = snapshot(
        issued_at=NOW,
        proxies=(proxy("p1", labels={"a": "1", "b": "2"}),),
        clients=(client(allowed_regions=frozenset(["US", "cn-gd", "de"])),),
    )
    other = snapshot(
        issued_at=NOW.astimezone(timezone(timedelta(hours=8))),  # the same instant
        proxies=(proxy("p1", labels={"b": "2", "a": "1"}),),
        clients=(client(allowed_regions=frozenset(["de", "cn-gd", "US"])),),
    )
    assert seal_snapshot(one).checksum == seal_snapshot(other).checksum
    assert encode_snapshot(one) == encode_snapshot(other)


#: A different valid value of every field (a new field fails the test until it has one).
OTHER_SNAPSHOT = {
    "version": 8,
    "epoch": 43,
    "issued_at": NOW + timedelta(milliseconds=1),
    "max_staleness": timedelta(seconds=31),
    "proxies": (proxy("p1"),),
    "credentials": (Credential("c1", "user", PASSWORD + "!"),),
    "clients": (),
}
OTHER_PROXY = {
    "proxy_id": "p9",
    "host": "10.0.0.2",
    "port": 8081,
    "protocol": "https",
    "region": "DE",
    "carrier": "att",
    "upstream": "u2",
    "labels": {"pool": "b", "city": "广州"},
    "max_concurrency": 5,
    "lease_expires_at": NOW + timedelta(seconds=31),
    "usable_until": NOW + timedelta(seconds=61),
    "credential_ref": None,
}
OTHER_CREDENTIAL = {"ref": "c2", "username": "user2", "password": PASSWORD + "?"}
OTHER_CLIENT = {
    "name": "other",
    "verifier": make_verifier(KEY, b"t" * 16),
    "max_connections": 101,
    "requests_per_second": 51,
    "allowed_upstreams": frozenset({"u1"}),
    "allowed_regions": frozenset(),
    "allowed_protocols": frozenset({"http", "socks5"}),
}


def _variants() -> list[tuple[str, Snapshot]]:
    base = snapshot()
    found = []
    for name, value in OTHER_SNAPSHOT.items():
        found.append((name, dataclasses.replace(base, **{name: value})))
    for name, value in OTHER_PROXY.items():
        changed = dataclasses.replace(base.proxies[0], **{name: value})
        credentials = base.credentials if name != "credential_ref" else ()
        found.append(
            (
                f"proxies[0].{name}",
                dataclasses.replace(
                    base, proxies=(changed, *base.proxies[1:]), credentials=credentials
                ),
            )
        )
    for name, value in OTHER_CREDENTIAL.items():
        credential = dataclasses.replace(base.credentials[0], **{name: value})
        proxies = tuple(
            p if p.credential_ref is None else dataclasses.replace(p, credential_ref=credential.ref)
            for p in base.proxies
        )
        found.append(
            (
                f"credentials[0].{name}",
                dataclasses.replace(base, proxies=proxies, credentials=(credential,)),
            )
        )
    for name, value in OTHER_CLIENT.items():
        changed_client = dataclasses.replace(base.clients[0], **{name: value})
        found.append((f"clients[0].{name}", dataclasses.replace(base, clients=(changed_client,))))
    return found


def test_every_field_has_a_variant() -> None:
    names = {f.name for f in dataclasses.fields(Snapshot)} - {"checksum", "wire"}
    assert names == OTHER_SNAPSHOT.keys()
    assert {f.name for f in dataclasses.fields(SnapshotProxy)} == OTHER_PROXY.keys()
    assert {f.name for f in dataclasses.fields(Credential)} == OTHER_CREDENTIAL.keys()
    assert {f.name for f in dataclasses.fields(GatewayClient)} == OTHER_CLIENT.keys()


@pytest.mark.parametrize(("field", "changed"), _variants(), ids=[v[0] for v in _variants()])
def test_the_checksum_changes_with_any_field(field: str, changed: Snapshot) -> None:
    assert seal_snapshot(changed).checksum != seal_snapshot(snapshot()).checksum


def test_a_snapshot_sealed_with_a_stale_checksum_is_refused() -> None:
    sealed = seal_snapshot(snapshot())
    edited = dataclasses.replace(sealed.snapshot, epoch=sealed.snapshot.epoch + 1)
    with pytest.raises(WireChecksumError) as caught:
        seal_snapshot(edited)
    assert_refused(caught.value, "checksum")
    with pytest.raises(ValueError, match="unsealed"):
        snapshot().ack()


def test_a_changed_value_under_the_old_checksum_is_refused() -> None:
    tree = tree_of(encode_snapshot(snapshot()))
    tree["proxies"][0]["port"] = 8081
    with pytest.raises(WireChecksumError) as caught:
        decode_snapshot(json.dumps(tree).encode())
    assert_refused(caught.value, "checksum")


_SEALED = encode_snapshot(snapshot())


@settings(max_examples=400, deadline=None)
@given(st.integers(0, len(_SEALED) - 1), st.integers(0, 7))
def test_a_flipped_bit_anywhere_is_refused(position: int, bit: int) -> None:
    flipped = bytearray(_SEALED)
    flipped[position] ^= 1 << bit
    with pytest.raises(WireError) as caught:
        decode_snapshot(bytes(flipped))
    assert PASSWORD not in str(caught.value)


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
    assert_refused(refusal(_set([field], [{}] * (maximum + 1)), WireBoundError), field)


@pytest.mark.parametrize(
    ("field", "maximum"),
    [("entries", limits.MAX_REPORT_ENTRIES), ("traffic", limits.MAX_TRAFFIC_UPSTREAMS)],
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
    maximum, and a full traffic table: the worker can always send its complete counts."""
    top = limits.MAX_COUNTER
    entries = tuple(
        ReportEntry(f"{i:0100d}", top, limits.MAX_CONCURRENCY, limits.MAX_CONCURRENCY)
        for i in range(limits.MAX_REPORT_ENTRIES)
    )
    traffic = tuple(
        UpstreamTraffic(f"{i:064d}", top, top, top, top)
        for i in range(limits.MAX_TRAFFIC_UPSTREAMS)
    )
    body = RuntimeReportBody(top, top, top, entries, traffic)
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


# --- malformed input ------------------------------------------------------------------------


def _set(path: list, value: object):
    def change(tree: dict) -> None:
        target = tree
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return change


def _drop(path: list):
    def change(tree: dict) -> None:
        target = tree
        for step in path[:-1]:
            target = target[step]
        del target[path[-1]]

    return change


MALFORMED_SNAPSHOTS = [
    ("version", _set(["version"], True)),  # a bool is not an int
    ("version", _set(["version"], 0)),
    ("version", _set(["version"], "7")),
    ("epoch", _set(["epoch"], -1)),
    ("epoch", _set(["epoch"], limits.MAX_COUNTER + 1)),
    ("issued_at_ms", _set(["issued_at_ms"], None)),
    ("max_staleness_s", _set(["max_staleness_s"], 0)),
    ("proxies", _set(["proxies"], {})),
    ("proxies[0]", _set(["proxies", 0], [])),
    ("proxies[0].port", _set(["proxies", 0, "port"], 0)),
    ("proxies[0].port", _set(["proxies", 0, "port"], 65_536)),
    ("proxies[0].port", _set(["proxies", 0, "port"], True)),
    ("proxies[1].port", _set(["proxies", 1, "port"], "8080")),
    ("proxies[0].protocol", _set(["proxies", 0, "protocol"], "ftp")),
    ("proxies[0].protocol", _set(["proxies", 0, "protocol"], ["http"])),
    ("proxies[0].proxy_id", _set(["proxies", 0, "proxy_id"], "")),
    ("proxies[0].proxy_id", _set(["proxies", 0, "proxy_id"], "p 1")),
    ("proxies[0].host", _set(["proxies", 0, "host"], "10.0.0.1\n")),
    ("proxies[0].region", _set(["proxies", 0, "region"], 5)),
    ("proxies[0].upstream", _set(["proxies", 0, "upstream"], "u/1")),
    ("proxies[0].labels", _set(["proxies", 0, "labels"], [])),
    ("proxies[0].labels.pool", _set(["proxies", 0, "labels", "pool"], 1)),
    ("proxies[0].max_concurrency", _set(["proxies", 0, "max_concurrency"], 0)),
    ("proxies[0].lease_expires_at_ms", _set(["proxies", 0, "lease_expires_at_ms"], -1)),
    ("proxies[0].usable_until_ms", _set(["proxies", 0, "usable_until_ms"], "now")),
    ("proxies[0].credential_ref", _set(["proxies", 0, "credential_ref"], "nowhere")),
    ("proxies[1].proxy_id", _set(["proxies", 1, "proxy_id"], "p1")),
    ("proxies[0].port", _drop(["proxies", 0, "port"])),
    ("proxies[0].tls", _set(["proxies", 0, "tls"], 1)),
    ("credentials[0].password", _set(["credentials", 0, "password"], 12345)),
    ("credentials[0].password", _set(["credentials", 0, "password"], PASSWORD + "\x00")),
    ("credentials[0].username", _set(["credentials", 0, "username"], "")),
    (
        "credentials[1].ref",
        lambda t: t["credentials"].append({"ref": "c9", "username": "u", "password": PASSWORD}),
    ),
    ("credentials[0].password", _drop(["credentials", 0, "password"])),
    ("clients[0].name", _set(["clients", 0, "name"], "")),
    ("clients[0].verifier", _set(["clients", 0, "verifier"], VERIFIER.upper())),
    ("clients[0].verifier", _set(["clients", 0, "verifier"], VERIFIER[:-1])),
    ("clients[0].allowed_upstreams", _set(["clients", 0, "allowed_upstreams"], ["u2", "u1"])),
    ("clients[0].allowed_upstreams", _set(["clients", 0, "allowed_upstreams"], ["u1", "u1"])),
    ("clients[0].allowed_protocols[0]", _set(["clients", 0, "allowed_protocols"], ["ftp"])),
    ("clients[0].allowed_regions", _set(["clients", 0, "allowed_regions"], "US")),
    ("clients[0].max_connections", _set(["clients", 0, "max_connections"], 0)),
    ("clients[0].requests_per_second", _set(["clients", 0, "requests_per_second"], False)),
    ("clients[0].verifier", _drop(["clients", 0, "verifier"])),
    ("clients", _drop(["clients"])),
    ("extra", _set(["extra"], 1)),
    ("wire", _set(["wire"], "1")),
    ("wire", _set(["wire"], True)),
    ("wire", _drop(["wire"])),
]


@pytest.mark.parametrize(
    ("path", "change"), MALFORMED_SNAPSHOTS, ids=[m[0] for m in MALFORMED_SNAPSHOTS]
)
def test_a_malformed_snapshot_is_refused_naming_the_field(path: str, change) -> None:
    assert_refused(refusal(change, WireFormatError), path)


def test_an_unknown_field_is_named_only_when_it_is_plainly_a_name() -> None:
    error = refusal(_set(["proxies", 0, PASSWORD], 1), WireFormatError)
    assert_refused(error, "proxies[0]")
    assert "unknown field" in str(error)


@pytest.mark.parametrize("version", [0, 2, 99])
def test_another_wire_version_is_its_own_error(version: int) -> None:
    for encoded, decode in [
        (encode_snapshot(snapshot()), decode_snapshot),
        (encode_report(report()), decode_report),
        (encode_ack(SnapshotAck(1, 1, "0" * 64)), decode_ack),
    ]:
        tree = tree_of(encoded)
        tree["wire"] = version
        tree["a_field_of_the_next_version"] = 1.5  # read after the version, not before
        with pytest.raises(WireVersionError) as caught:
            decode(json.dumps(tree).encode())
        assert_refused(caught.value, "wire")


def test_encoding_another_wire_version_is_refused() -> None:
    with pytest.raises(WireVersionError):
        encode_snapshot(snapshot(wire=2))


@pytest.mark.parametrize(
    ("data", "path"),
    [
        (b"", "snapshot"),
        (b"not json", "snapshot"),
        (b"\xff\xfe{}", "snapshot"),
        (b"[1]", "snapshot"),
        (b"[" * 100_000 + b"]" * 100_000, "snapshot"),
        (b'{"wire": 1, "wire": 1}', "snapshot"),
        (b'{"wire": 1e0}', "wire"),
        (b'{"wire": NaN}', "wire"),
        (b'{"wire": 1, "version": ' + b"9" * 5_000 + b"}", "snapshot"),
        (b'{"wire": 1}', "checksum"),
    ],
)
def test_what_is_not_a_snapshot_document_is_refused(data: bytes, path: str) -> None:
    with pytest.raises(WireFormatError) as caught:
        decode_snapshot(data)
    assert_refused(caught.value, path)


@pytest.mark.parametrize("change", [_set(["checksum"], "A" * 64), _drop(["checksum"])])
def test_a_snapshot_without_a_lowercase_hex_checksum_is_refused(change) -> None:
    tree = tree_of(encode_snapshot(snapshot()))
    change(tree)
    with pytest.raises(WireFormatError) as caught:
        decode_snapshot(json.dumps(tree).encode())
    assert_refused(caught.value, "checksum")


def test_decoding_takes_bytes_only() -> None:
    with pytest.raises(WireFormatError, match=r"^snapshot: must be bytes"):
        decode_snapshot(encode_snapshot(snapshot()).decode())


MALFORMED_REPORTS = [
    ("report_sequence", _set(["report_sequence"], 0)),
    ("report_sequence", _set(["report_sequence"], True)),
    ("snapshot_version", _set(["snapshot_version"], -1)),
    ("epoch", _set(["epoch"], 1.0)),
    ("entries[0].active", _set(["entries", 0, "active"], -1)),
    ("entries[0].reserved", _set(["entries", 0, "reserved"], True)),
    ("entries[0].reserved", _set(["entries", 0, "reserved"], limits.MAX_CONCURRENCY + 1)),
    ("entries[0].epoch", _drop(["entries", 0, "epoch"])),
    ("entries[0].draining", _set(["entries", 0, "draining"], 1)),
    (
        "entries[1].proxy_id",
        _set(["entries"], [{"proxy_id": "p1", "epoch": 1, "active": 0, "reserved": 0}] * 2),
    ),
    ("traffic[0].upstream", _set(["traffic", 0, "upstream"], "")),
    ("traffic[0].bytes_up", _set(["traffic", 0, "bytes_up"], -5)),
    ("traffic[0].errors", _set(["traffic", 0, "errors"], "1")),
    ("traffic", _drop(["traffic"])),
    ("session", _set(["session"], "s1")),
]


MALFORMED_ACKS = [
    ("version", _set(["version"], 0)),
    ("epoch", _set(["epoch"], False)),
    ("checksum", _set(["checksum"], "abc")),
    ("checksum", _drop(["checksum"])),
    ("session", _set(["session"], "s1")),
]
MESSAGES = {
    "report": (lambda: encode_report(report()), decode_report),
    "ack": (lambda: encode_ack(SnapshotAck(1, 1, "0" * 64)), decode_ack),
}


@pytest.mark.parametrize(
    ("document", "path", "change"),
    [("report", *m) for m in MALFORMED_REPORTS] + [("ack", *m) for m in MALFORMED_ACKS],
    ids=[f"report-{m[0]}" for m in MALFORMED_REPORTS] + [f"ack-{m[0]}" for m in MALFORMED_ACKS],
)
def test_a_malformed_message_is_refused_naming_the_field(document: str, path: str, change) -> None:
    encode, decode = MESSAGES[document]
    tree = tree_of(encode())
    change(tree)
    with pytest.raises(WireFormatError) as caught:
        decode(json.dumps(tree).encode())
    assert_refused(caught.value, path)


@pytest.mark.parametrize(
    ("path", "bad"),
    [
        ("issued_at", snapshot(issued_at=datetime(2026, 7, 29, 12, 0))),  # noqa: DTZ001
        ("proxies[1].port", snapshot(proxies=(proxy("p1"), proxy("p2", port=True)))),
        ("proxies", snapshot(proxies=[proxy("p1")][0])),
        ("proxies[0]", snapshot(proxies=("p1",))),
        (
            "clients[0].allowed_protocols[0]",
            snapshot(clients=(client(allowed_protocols=frozenset({1})),)),
        ),
        (
            "credentials[1].ref",
            snapshot(
                credentials=(Credential("c1", "u", PASSWORD), Credential("c9", "u", PASSWORD))
            ),
        ),
    ],
)
def test_encoding_refuses_what_decoding_would(path: str, bad: Snapshot) -> None:
    with pytest.raises(WireFormatError) as caught:
        encode_snapshot(bad)
    assert_refused(caught.value, path)


def test_encoding_refuses_a_report_entry_of_the_wrong_kind() -> None:
    with pytest.raises(WireFormatError) as caught:
        encode_report(report(entries=(ReportEntry("p1", 1, -1, 0),)))
    assert_refused(caught.value, "entries[0].active")
    with pytest.raises(WireFormatError, match=r"^report: must be a RuntimeReportBody"):
        encode_report(snapshot())


# --- secrets ---------------------------------------------------------------------------------


def test_reprs_hold_no_password_and_no_verifier() -> None:
    text = repr(snapshot()) + repr(seal_snapshot(snapshot()).snapshot)
    assert PASSWORD not in text
    assert VERIFIER not in text
    assert "user" in text  # the rest is there


def test_the_verifier_accepts_its_key_only() -> None:
    salt = new_salt()
    verifier = make_verifier(KEY, salt)
    assert verify(KEY, verifier)
    assert not verify(KEY[:-1] + "j", verifier)
    assert not verify(KEY + "k", verifier)
    assert not verify("", verifier)
    assert not verify(KEY, verifier[:-1] + ("0" if verifier[-1] != "0" else "1"))


def test_a_salt_makes_verifiers_differ() -> None:
    salts = [new_salt() for _ in range(3)]
    verifiers = {make_verifier(KEY, salt) for salt in salts}
    assert len(verifiers) == 3
    assert all(verify(KEY, v) for v in verifiers)
    assert len({make_verifier(KEY, salt) for salt in [b"a" * 16, b"a" * 16]}) == 1


def test_a_verifier_holds_neither_the_key_nor_the_hash_postgresql_keeps() -> None:
    verifier = make_verifier(KEY, new_salt())
    stored = hashlib.sha256(KEY.encode()).hexdigest()  # pool_admin's ApiKey.key_hash
    assert KEY not in verifier
    assert KEY.split("_")[-1] not in verifier
    assert stored not in verifier


@pytest.mark.parametrize(
    "verifier", ["", "hmac-sha256$$", "sha256$" + "0" * 32 + "$" + "0" * 64, None, 5]
)
def test_a_malformed_verifier_verifies_nothing(verifier) -> None:
    assert not verify(KEY, verifier)


@pytest.mark.parametrize(
    ("key", "salt"), [(KEY, b"short"), (KEY, b"x" * 65), ("", b"x" * 16), (KEY, "x" * 16)]
)
def test_make_verifier_refuses_an_unusable_key_or_salt(key, salt) -> None:
    with pytest.raises(ValueError) as caught:
        make_verifier(key, salt)
    assert KEY not in str(caught.value)
