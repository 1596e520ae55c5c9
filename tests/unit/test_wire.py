"""The gateway's wire shape (gateway_runtime/wire): what one side encodes the other decodes to
the same value, and the checksum covers every field and nothing else."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from datetime import timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway_runtime.wire import (
    WIRE_VERSION,
    Credential,
    GatewayClient,
    RuntimeReportBody,
    Snapshot,
    SnapshotAck,
    SnapshotProxy,
    WireChecksumError,
    WireError,
    decode_ack,
    decode_report,
    decode_snapshot,
    encode_ack,
    encode_report,
    encode_snapshot,
    make_verifier,
    seal_snapshot,
)
from tests.unit.wire_documents import (
    KEY,
    NOW,
    PASSWORD,
    acks,
    assert_refused,
    client,
    proxy,
    reports,
    snapshot,
    snapshots,
    tree_of,
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
    "assignment_epoch": 7,
    "lease_expires_at": NOW + timedelta(seconds=31),
    "usable_until": NOW + timedelta(seconds=61),
    "credential_ref": None,
}
OTHER_CREDENTIAL = {"ref": "c2", "username": "user2", "password": PASSWORD + "?"}
OTHER_CLIENT = {
    "name": "other",
    "verifiers": (make_verifier(KEY, b"t" * 16), make_verifier(KEY + "x", b"u" * 16)),
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
