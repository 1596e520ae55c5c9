"""The TLS a gateway worker speaks to the control plane with (docs/gateway.md "Mutual TLS"):
which CA the control plane's certificate must chain to, and the worker's own certificate and
key, presented to the reverse proxy that verifies workers (deploy/nginx/proxypool.conf).

Each file is read once, at start, into one ``ssl.SSLContext`` the control client keeps for the
process's life; a setting the context cannot be made from stops the worker with an error that
names the setting and the path, never a file's content. The key file must not be readable by
every user of the machine, and must not be encrypted (a worker has nobody to ask for its
passphrase).
"""

from __future__ import annotations

import os
import ssl
import stat


class TLSConfigError(Exception):
    """A TLS setting the worker cannot start with; the message names it, never a key."""


def _readable(setting: str, path: str) -> os.stat_result:
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise TLSConfigError(f"{setting}: {path} is not a file")
        with open(path, "rb"):  # the worker's user must be able to read it, not only see it
            pass
    except OSError as exc:
        raise TLSConfigError(f"{setting}: cannot read {path}: {exc.strerror}") from None
    return info


def _no_passphrase() -> bytes:
    raise TLSConfigError(
        "GATEWAY_CLIENT_KEY: the key is encrypted; give it unencrypted, readable by the "
        "worker's user only"
    )


def control_tls_context(ca: str | None, cert: str | None, key: str | None) -> ssl.SSLContext | None:
    """The context for ``https://`` control URLs, or None when none of the three is set (then
    the system's CAs verify the control plane and the worker presents no certificate).

    ``ca``: a PEM file of the CA(s) the control plane's certificate must chain to (only they
    are trusted). ``cert`` and ``key``: the worker's certificate (PEM, its chain after it) and
    its private key, given together."""
    if not (ca or cert or key):
        return None
    if bool(cert) != bool(key):
        raise TLSConfigError("GATEWAY_CLIENT_CERT and GATEWAY_CLIENT_KEY are given together")
    if ca:
        _readable("GATEWAY_CONTROL_CA", ca)
        try:
            context = ssl.create_default_context(cafile=ca)
        except ssl.SSLError as exc:
            raise TLSConfigError(
                f"GATEWAY_CONTROL_CA: {ca} holds no PEM certificate ({exc.reason or exc})"
            ) from None
    else:
        context = ssl.create_default_context()
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert and key:
        _readable("GATEWAY_CLIENT_CERT", cert)
        if _readable("GATEWAY_CLIENT_KEY", key).st_mode & stat.S_IRWXO:
            raise TLSConfigError(
                f"GATEWAY_CLIENT_KEY: {key} is open to every user of the machine "
                "(chmod 600 or 640 it)"
            )
        try:
            context.load_cert_chain(cert, key, password=_no_passphrase)
        except ssl.SSLError as exc:
            # OpenSSL's reason (e.g. KEY_VALUES_MISMATCH, NO_START_LINE) names no secret.
            raise TLSConfigError(
                "GATEWAY_CLIENT_CERT/GATEWAY_CLIENT_KEY: not a PEM certificate and its key "
                f"({exc.reason or 'unreadable'})"
            ) from None
    return context
