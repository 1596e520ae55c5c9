"""The gateway's wire shape: malformed input is refused with a typed error naming the field path
and no secret; encoding refuses what decoding would; the clients' key verifiers."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime

import pytest

from gateway_runtime.wire import (
    Credential,
    ReportEntry,
    Snapshot,
    SnapshotAck,
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
from tests.unit.wire_documents import (
    KEY,
    PASSWORD,
    VERIFIER,
    assert_refused,
    client,
    drop_at,
    proxy,
    refusal,
    report,
    set_at,
    snapshot,
    tree_of,
)

# --- malformed input ------------------------------------------------------------------------


MALFORMED_SNAPSHOTS = [
    ("version", set_at(["version"], True)),  # a bool is not an int
    ("version", set_at(["version"], 0)),
    ("version", set_at(["version"], "7")),
    ("epoch", set_at(["epoch"], -1)),
    ("epoch", set_at(["epoch"], limits.MAX_COUNTER + 1)),
    ("issued_at_ms", set_at(["issued_at_ms"], None)),
    ("max_staleness_s", set_at(["max_staleness_s"], 0)),
    ("proxies", set_at(["proxies"], {})),
    ("proxies[0]", set_at(["proxies", 0], [])),
    ("proxies[0].port", set_at(["proxies", 0, "port"], 0)),
    ("proxies[0].port", set_at(["proxies", 0, "port"], 65_536)),
    ("proxies[0].port", set_at(["proxies", 0, "port"], True)),
    ("proxies[1].port", set_at(["proxies", 1, "port"], "8080")),
    ("proxies[0].protocol", set_at(["proxies", 0, "protocol"], "ftp")),
    ("proxies[0].protocol", set_at(["proxies", 0, "protocol"], ["http"])),
    ("proxies[0].proxy_id", set_at(["proxies", 0, "proxy_id"], "")),
    ("proxies[0].proxy_id", set_at(["proxies", 0, "proxy_id"], "p 1")),
    ("proxies[0].host", set_at(["proxies", 0, "host"], "10.0.0.1\n")),
    ("proxies[0].region", set_at(["proxies", 0, "region"], 5)),
    ("proxies[0].upstream", set_at(["proxies", 0, "upstream"], "u/1")),
    ("proxies[0].labels", set_at(["proxies", 0, "labels"], [])),
    ("proxies[0].labels.pool", set_at(["proxies", 0, "labels", "pool"], 1)),
    ("proxies[0].max_concurrency", set_at(["proxies", 0, "max_concurrency"], 0)),
    ("proxies[0].assignment_epoch", set_at(["proxies", 0, "assignment_epoch"], 0)),
    ("proxies[0].assignment_epoch", drop_at(["proxies", 0, "assignment_epoch"])),
    ("proxies[0].lease_expires_at_ms", set_at(["proxies", 0, "lease_expires_at_ms"], -1)),
    ("proxies[0].usable_until_ms", set_at(["proxies", 0, "usable_until_ms"], "now")),
    ("proxies[0].credential_ref", set_at(["proxies", 0, "credential_ref"], "nowhere")),
    ("proxies[1].proxy_id", set_at(["proxies", 1, "proxy_id"], "p1")),
    ("proxies[0].port", drop_at(["proxies", 0, "port"])),
    ("proxies[0].tls", set_at(["proxies", 0, "tls"], 1)),
    ("credentials[0].password", set_at(["credentials", 0, "password"], 12345)),
    ("credentials[0].password", set_at(["credentials", 0, "password"], PASSWORD + "\x00")),
    ("credentials[0].username", set_at(["credentials", 0, "username"], "")),
    (
        "credentials[1].ref",
        lambda t: t["credentials"].append({"ref": "c9", "username": "u", "password": PASSWORD}),
    ),
    ("credentials[0].password", drop_at(["credentials", 0, "password"])),
    ("clients[0].name", set_at(["clients", 0, "name"], "")),
    ("clients[0].verifiers[0]", set_at(["clients", 0, "verifiers"], [VERIFIER.upper()])),
    ("clients[0].verifiers[0]", set_at(["clients", 0, "verifiers"], [VERIFIER[:-1]])),
    ("clients[0].verifiers[1]", set_at(["clients", 0, "verifiers"], [VERIFIER, 5])),
    ("clients[0].verifiers", set_at(["clients", 0, "verifiers"], [])),
    ("clients[0].verifiers", set_at(["clients", 0, "verifiers"], [VERIFIER, VERIFIER])),
    ("clients[0].verifiers", set_at(["clients", 0, "verifiers"], VERIFIER)),
    ("clients[0].allowed_upstreams", set_at(["clients", 0, "allowed_upstreams"], ["u2", "u1"])),
    ("clients[0].allowed_upstreams", set_at(["clients", 0, "allowed_upstreams"], ["u1", "u1"])),
    ("clients[0].allowed_protocols[0]", set_at(["clients", 0, "allowed_protocols"], ["ftp"])),
    ("clients[0].allowed_regions", set_at(["clients", 0, "allowed_regions"], "US")),
    ("clients[0].max_connections", set_at(["clients", 0, "max_connections"], 0)),
    ("clients[0].requests_per_second", set_at(["clients", 0, "requests_per_second"], False)),
    ("clients[0].verifiers", drop_at(["clients", 0, "verifiers"])),
    ("clients", drop_at(["clients"])),
    ("extra", set_at(["extra"], 1)),
    ("wire", set_at(["wire"], "1")),
    ("wire", set_at(["wire"], True)),
    ("wire", drop_at(["wire"])),
]


@pytest.mark.parametrize(
    ("path", "change"), MALFORMED_SNAPSHOTS, ids=[m[0] for m in MALFORMED_SNAPSHOTS]
)
def test_a_malformed_snapshot_is_refused_naming_the_field(path: str, change) -> None:
    assert_refused(refusal(change, WireFormatError), path)


def test_an_unknown_field_is_named_only_when_it_is_plainly_a_name() -> None:
    error = refusal(set_at(["proxies", 0, PASSWORD], 1), WireFormatError)
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


@pytest.mark.parametrize("change", [set_at(["checksum"], "A" * 64), drop_at(["checksum"])])
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
    ("report_sequence", set_at(["report_sequence"], 0)),
    ("report_sequence", set_at(["report_sequence"], True)),
    ("snapshot_version", set_at(["snapshot_version"], -1)),
    ("epoch", set_at(["epoch"], 1.0)),
    ("entries[0].active", set_at(["entries", 0, "active"], -1)),
    ("entries[0].reserved", set_at(["entries", 0, "reserved"], True)),
    ("entries[0].reserved", set_at(["entries", 0, "reserved"], limits.MAX_CONCURRENCY + 1)),
    ("entries[0].epoch", drop_at(["entries", 0, "epoch"])),
    ("entries[0].draining", set_at(["entries", 0, "draining"], 1)),
    (
        "entries[1].proxy_id",
        set_at(["entries"], [{"proxy_id": "p1", "epoch": 1, "active": 0, "reserved": 0}] * 2),
    ),
    ("traffic[0].upstream", set_at(["traffic", 0, "upstream"], "")),
    ("traffic[0].client", set_at(["traffic", 0, "client"], "(others)")),
    ("traffic[0].client", drop_at(["traffic", 0, "client"])),
    ("traffic[0].bytes_up", set_at(["traffic", 0, "bytes_up"], -5)),
    ("traffic[0].failed_closed", set_at(["traffic", 0, "failed_closed"], "1")),
    ("traffic[0].tunnels", set_at(["traffic", 0, "tunnels"], limits.MAX_COUNTER + 1)),
    ("traffic[0].errors", set_at(["traffic", 0, "errors"], 1)),
    ("traffic[1].client and upstream", set_at(["traffic", 1, "client"], "shop")),
    ("traffic", drop_at(["traffic"])),
    ("refused_snapshots", set_at(["refused_snapshots"], -1)),
    ("refused_snapshots", drop_at(["refused_snapshots"])),
    ("session", set_at(["session"], "s1")),
]


MALFORMED_ACKS = [
    ("version", set_at(["version"], 0)),
    ("epoch", set_at(["epoch"], False)),
    ("checksum", set_at(["checksum"], "abc")),
    ("checksum", drop_at(["checksum"])),
    ("session", set_at(["session"], "s1")),
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
