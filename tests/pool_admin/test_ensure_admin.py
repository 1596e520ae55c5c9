"""manage.py ensure_admin: creates once, idempotent, never prints a secret it did not make."""

import os
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from tests.harness.commands import manage


def run(monkeypatch, secrets_fd=None, **env):
    for name in ("ADMIN_USERNAME", "ADMIN_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    out = StringIO()
    options = {} if secrets_fd is None else {"secrets_fd": secrets_fd}
    call_command("ensure_admin", stdout=out, **options)
    return out.getvalue()


@pytest.mark.django_db
def test_creates_with_admin_password_then_is_a_no_op(monkeypatch):
    first = run(monkeypatch, ADMIN_PASSWORD="Correct-Horse-42")
    assert "Created superuser 'admin'" in first
    assert "Correct-Horse-42" not in first
    user = get_user_model().objects.get(username="admin")
    assert user.is_superuser and user.is_staff
    assert user.check_password("Correct-Horse-42")

    second = run(monkeypatch, ADMIN_PASSWORD="Another-Pass-43")
    assert "already exists" in second
    assert "Another-Pass-43" not in second
    user.refresh_from_db()
    assert user.check_password("Correct-Horse-42")
    assert get_user_model().objects.count() == 1


@pytest.mark.django_db
def test_generated_password_is_printed_once_and_works(monkeypatch):
    first = run(monkeypatch, ADMIN_USERNAME="operator")
    line = next(ln for ln in first.splitlines() if "Generated password" in ln)
    password = line.rsplit(": ", 1)[1].strip()
    assert len(password) >= 20
    assert get_user_model().objects.get(username="operator").check_password(password)
    again = run(monkeypatch, ADMIN_USERNAME="operator")
    assert password not in again and "Generated" not in again


@pytest.mark.django_db
def test_weak_password_is_refused_without_echoing_it(monkeypatch):
    with pytest.raises(CommandError, match="ADMIN_PASSWORD rejected") as info:
        run(monkeypatch, ADMIN_PASSWORD="12345")
    assert "12345" not in str(info.value)
    assert not get_user_model().objects.exists()


def test_bad_username_exits_non_zero_with_one_line_reason():
    done = manage("ensure_admin", ADMIN_USERNAME="no spaces allowed!")
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "CommandError: ADMIN_USERNAME 'no spaces allowed!' is not a valid username"
    ]


@pytest.mark.django_db
def test_with_secrets_fd_a_generated_password_goes_only_to_that_descriptor(monkeypatch):
    """make run's way: the password comes back on a pipe for the terminal, never on stdout
    (which make run writes to a log file)."""
    read_end, write_end = os.pipe()
    try:
        out = run(monkeypatch, secrets_fd=write_end)
        os.close(write_end)
        write_end = -1
        handed = os.read(read_end, 4096).decode()
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    name, _, password = handed.strip().partition("=")
    assert name == "admin_password" and len(password) >= 20
    assert password not in out and "went to --secrets-fd" in out
    assert get_user_model().objects.get(username="admin").check_password(password)


@pytest.mark.django_db
def test_a_secrets_fd_that_is_not_open_is_refused_before_anything_changes(monkeypatch):
    with pytest.raises(CommandError, match="--secrets-fd 987 is not an open file descriptor"):
        run(monkeypatch, secrets_fd=987)
    assert not get_user_model().objects.exists()
