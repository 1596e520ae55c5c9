"""Encryption at rest, key rotation, and the CredentialStore behind SecretRef."""

from io import StringIO

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command
from django.db import connection

from activity.credentials import (
    CredentialResolver,
    CredentialUnavailable,
    CredentialVersion,
    SecretRef,
)
from pool_admin.config import secrets as secret_box
from pool_admin.config.credential_store import CredentialStore
from pool_admin.config.models import Credential
from pool_admin.config.secrets import SecretUnreadable
from tests.harness.commands import database_url_of_test_db, manage

from .conftest import SECRET


def stored_ciphertext(pk):
    with connection.cursor() as cursor:
        cursor.execute("SELECT ciphertext FROM config_credential WHERE id = %s", [pk])
        return bytes(cursor.fetchone()[0])


def test_round_trip_and_fresh_ciphertexts(keys):
    token = secret_box.encrypt(SECRET)
    assert SECRET.encode() not in token
    assert secret_box.decrypt(token) == SECRET
    assert secret_box.decrypt(memoryview(token)) == SECRET  # what psycopg returns for bytea
    assert secret_box.encrypt(SECRET) != token  # random IV: equal secrets do not show


def test_first_key_encrypts_every_key_decrypts(keys, settings):
    old_token = secret_box.encrypt(SECRET)
    settings.POOL_SECRET_KEYS = (keys.new, keys.old)
    new_token = secret_box.encrypt(SECRET)
    assert Fernet(keys.new.encode()).decrypt(new_token) == SECRET.encode()
    assert secret_box.decrypt(old_token) == SECRET
    settings.POOL_SECRET_KEYS = (keys.new,)
    with pytest.raises(SecretUnreadable) as info:
        secret_box.decrypt(old_token)
    assert SECRET not in str(info.value) and old_token.decode() not in str(info.value)
    assert secret_box.key_id() == secret_box.key_id(keys.new) != secret_box.key_id(keys.old)


def test_damaged_ciphertext_is_unreadable(keys):
    with pytest.raises(SecretUnreadable):
        secret_box.decrypt(b"not a fernet token")


@pytest.mark.django_db
@pytest.mark.postgres
class TestCredentialStore:
    def test_put_then_resolve(self, keys):
        store = CredentialStore()
        version = store.put("acme-api", SECRET, username="acct-42")
        assert isinstance(version, CredentialVersion) and version.version == 1
        assert SECRET not in version.ref.ref and SECRET not in repr(version)
        row = Credential.objects.get(name="acme-api")
        assert version.ref.ref == f"cred:{row.pk}:1"
        assert SECRET.encode() not in stored_ciphertext(row.pk)
        resolved = store.resolve(version.ref)
        assert (resolved.username, resolved.password) == ("acct-42", SECRET)
        assert SECRET not in repr(resolved)

    def test_is_a_credential_resolver(self):
        resolver: CredentialResolver = CredentialStore()  # checked statically by the type
        assert callable(resolver.resolve)

    def test_replacing_a_secret_makes_a_new_version_and_retires_the_old_ref(self, keys):
        store = CredentialStore()
        first = store.put("acme-api", SECRET)
        second = store.put("acme-api", "rotated-provider-token")
        assert second.version == 2 and second.ref != first.ref
        assert store.resolve(second.ref).password == "rotated-provider-token"
        with pytest.raises(CredentialUnavailable, match="out of date"):
            store.resolve(first.ref)
        assert Credential.objects.count() == 1

    @pytest.mark.parametrize("ref", ["", "cred:", "cred:x:1", "cred:1", "static:1", "cred:1:1:1"])
    def test_malformed_refs_are_unavailable(self, keys, ref):
        with pytest.raises(CredentialUnavailable) as info:
            CredentialStore().resolve(SecretRef(ref))
        assert ref not in str(info.value) or not ref

    def test_unknown_and_undecryptable(self, keys, settings, credential):
        store = CredentialStore()
        with pytest.raises(CredentialUnavailable, match="unknown"):
            store.resolve(SecretRef(f"cred:{credential.pk + 1000}:1"))
        settings.POOL_SECRET_KEYS = (keys.new,)
        with pytest.raises(CredentialUnavailable, match="cannot be decrypted") as info:
            store.resolve(store.current(credential).ref)
        assert SECRET not in str(info.value)

    def test_current_matches_a_row_saved_elsewhere(self, credential):
        version = CredentialStore.current(credential)
        assert version == CredentialVersion(SecretRef(f"cred:{credential.pk}:1"), 1)
        assert CredentialStore().resolve(version.ref).password == SECRET


def rotate():
    out = StringIO()
    call_command("rotate_secret_key", stdout=out)
    return out.getvalue()


@pytest.mark.django_db
@pytest.mark.postgres
class TestRotateSecretKey:
    def test_rotation_with_two_keys(self, keys, settings):
        store = CredentialStore()
        refs = [store.put(f"cred-{i}", f"secret-{i}").ref for i in range(3)]
        before = {row.pk: stored_ciphertext(row.pk) for row in Credential.objects.all()}

        settings.POOL_SECRET_KEYS = (keys.new, keys.old)
        output = rotate()
        assert output.splitlines()[:3] == [
            "re-encrypted 1 of 3",
            "re-encrypted 2 of 3",
            "re-encrypted 3 of 3",
        ]
        assert f"key {secret_box.key_id(keys.new)}" in output
        assert all("secret-" not in line for line in output.splitlines())

        settings.POOL_SECRET_KEYS = (keys.new,)  # the old key is gone now
        for i, ref in enumerate(refs):
            assert store.resolve(ref).password == f"secret-{i}"  # same refs, same versions
        for pk, old in before.items():
            now = stored_ciphertext(pk)
            assert now != old
            assert Fernet(keys.new.encode()).decrypt(now).startswith(b"secret-")
        assert set(Credential.objects.values_list("key_id", flat=True)) == {
            secret_box.key_id(keys.new)
        }
        assert {h.version for h in Credential.history.all()} == {1}  # no history noise

    def test_nothing_to_do(self, keys):
        assert rotate().splitlines()[0] == "Done: 0 credential(s) now encrypted with key " + (
            secret_box.key_id(keys.old) + "."
        )

    def test_a_key_that_cannot_decrypt_a_row_changes_nothing(self, keys, settings):
        store = CredentialStore()
        store.put("under-old-1", "secret-a")
        settings.POOL_SECRET_KEYS = (keys.new,)
        store.put("under-new", "secret-b")  # under the new key
        settings.POOL_SECRET_KEYS = (keys.old,)
        store.put("under-old-2", "secret-c")
        settings.POOL_SECRET_KEYS = (keys.new,)  # forgot to keep the old key
        stranded = Credential.objects.filter(name__in=["under-old-1", "under-old-2"])
        first_bad = min(stranded.values_list("pk", flat=True))
        before = {
            pk: stored_ciphertext(pk) for pk in Credential.objects.values_list("pk", flat=True)
        }
        key_ids = dict(Credential.objects.values_list("pk", "key_id"))

        with pytest.raises(CommandError) as info:
            rotate()
        message = str(info.value)
        assert message == (
            f"credential id {first_bad} cannot be decrypted with any key in POOL_SECRET_KEY; "
            "nothing changed"
        )
        assert "\n" not in message
        assert {pk: stored_ciphertext(pk) for pk in before} == before
        assert dict(Credential.objects.values_list("pk", "key_id")) == key_ids


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_command_exits_non_zero_with_one_line_reason(keys):
    CredentialStore().put("acme-api", SECRET)  # committed: transaction=True
    database = database_url_of_test_db()
    done = manage("rotate_secret_key", DATABASE_URL=database, POOL_SECRET_KEY=keys.new)
    assert done.returncode != 0
    row = Credential.objects.get()
    assert done.stderr.strip().splitlines() == [
        f"CommandError: credential id {row.pk} cannot be decrypted with any key in "
        "POOL_SECRET_KEY; nothing changed"
    ]
    assert done.stdout == ""

    done = manage(
        "rotate_secret_key", DATABASE_URL=database, POOL_SECRET_KEY=f"{keys.new},{keys.old}"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "re-encrypted 1 of 1"
    assert SECRET not in done.stdout + done.stderr
