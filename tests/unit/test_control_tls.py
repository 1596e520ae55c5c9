"""A gateway worker's TLS to the control plane (gateway_runtime/control_tls.py): each bad
setting a clear error naming the setting, never a key; a control plane whose certificate
another CA signed is a ``tls_failed`` ControlError with OpenSSL's reason."""

from __future__ import annotations

import asyncio
import ssl

import pytest
from cryptography.hazmat.primitives import serialization

from gateway_runtime.__main__ import ConfigError, _parser, settings_from
from gateway_runtime.control_client import ControlClient, ControlError
from gateway_runtime.control_tls import TLSConfigError, control_tls_context
from gateway_runtime.server.worker import utc_now
from gateway_runtime.snapshot_store import SnapshotStore
from tests.harness.http_target import HttpTarget
from tests.harness.pki import TestCA

TOKEN = "pw_0123456789ab_abcdefghijklmnopqrstuvwxyz0123456789"


@pytest.fixture
def ca(tmp_path):
    return TestCA(tmp_path, "workers")


def test_none_set_is_the_systems_tls_and_a_good_set_is_one_context(ca):
    assert control_tls_context(None, None, None) is None
    issued = ca.issue("edge-1", server=False)
    context = control_tls_context(str(ca.cert), str(issued.cert), str(issued.key))
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2


def test_bad_files_are_named_and_no_key_is_shown(ca, tmp_path):
    issued = ca.issue("edge-1", server=False)
    other = ca.issue("edge-2", server=False)
    key_text = issued.key.read_text()
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    open_key = tmp_path / "open.key"
    open_key.write_text(key_text)
    open_key.chmod(0o644)
    cases = [
        ((None, str(issued.cert), None), "given together"),
        ((str(tmp_path / "missing.crt"), None, None), "GATEWAY_CONTROL_CA: cannot read"),
        ((str(garbage), None, None), "GATEWAY_CONTROL_CA: .* holds no PEM certificate"),
        ((str(tmp_path), None, None), "GATEWAY_CONTROL_CA: .* not a file"),
        ((None, str(issued.cert), str(tmp_path / "none.key")), "GATEWAY_CLIENT_KEY: cannot read"),
        ((None, str(issued.cert), str(open_key)), "open to every user"),
        ((None, str(issued.cert), str(other.key)), "not a PEM certificate and its key"),
        ((None, str(garbage), str(issued.key)), "not a PEM certificate and its key"),
    ]
    for (ca_file, cert, key), says in cases:
        with pytest.raises(TLSConfigError, match=says) as raised:
            control_tls_context(ca_file, cert, key)
        assert "PRIVATE KEY" not in str(raised.value) and key_text not in str(raised.value)


def test_an_encrypted_key_is_refused_without_asking_for_a_passphrase(ca, tmp_path):
    issued = ca.issue("edge-1", server=False)
    key = serialization.load_pem_private_key(issued.key.read_bytes(), None)
    locked = tmp_path / "locked.key"
    locked.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"passphrase"),
    ))  # fmt: skip
    locked.chmod(0o600)
    with pytest.raises(TLSConfigError, match="the key is encrypted"):
        control_tls_context(None, str(issued.cert), str(locked))


def test_the_worker_settings_take_the_files_and_want_https(ca):
    issued = ca.issue("edge-1", server=False)
    files = ["--control-ca", str(ca.cert), "--client-cert", str(issued.cert),
             "--client-key", str(issued.key)]  # fmt: skip
    env = {"GATEWAY_TOKEN": TOKEN}
    args = _parser().parse_args(["--control-url", "https://pool.example:8443", *files])
    made = settings_from(args, env)
    assert isinstance(made.control_tls, ssl.SSLContext)
    assert "SSLContext" not in repr(made)
    args = _parser().parse_args(["--control-url", "http://pool.example:8000", *files])
    with pytest.raises(ConfigError, match="must be https://"):
        settings_from(args, env)
    args = _parser().parse_args(["--control-url", "https://x", "--client-cert", str(issued.cert)])
    with pytest.raises(ConfigError, match="given together"):
        settings_from(args, env)


def test_a_control_plane_another_ca_signed_is_a_tls_failure(ca):
    """The worker trusts only GATEWAY_CONTROL_CA: a self-signed server is refused at the
    handshake, and the error says so (OpenSSL's reason), not merely 'unreachable'."""
    with HttpTarget(tls=True) as server:
        context = control_tls_context(str(ca.cert), None, None)
        client = ControlClient(server.url("/"), TOKEN, SnapshotStore(utc_now), tls=context)

        async def call() -> None:
            try:
                await client.open_session()
            finally:
                await client.close()

        with pytest.raises(ControlError) as raised:
            asyncio.run(call())
    assert raised.value.code == "tls_failed"
    assert raised.value.detail == "CERTIFICATE_VERIFY_FAILED"
    assert TOKEN not in str(raised.value)
