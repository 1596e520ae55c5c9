"""Admin login throttling (django-axes): wrong passwords lock a username+address pair out."""

import pytest
from django.contrib.auth import get_user_model

pytestmark = pytest.mark.django_db

PASSWORD = "a-Long-pass-123"
LOGIN = "/admin/login/?next=/admin/"


@pytest.fixture
def boss():
    return get_user_model().objects.create_superuser("boss", password=PASSWORD)


def login(client, password, address="127.0.0.1"):
    return client.post(LOGIN, {"username": "boss", "password": password}, REMOTE_ADDR=address)


def test_five_wrong_passwords_lock_the_right_one_out(client, boss):
    for _ in range(4):
        assert login(client, "wrong-password").status_code == 200  # the form, with its error
    assert login(client, "wrong-password").status_code == 429  # the fifth locks the pair out
    locked = login(client, PASSWORD)
    assert locked.status_code == 429
    assert client.get("/admin/").status_code == 302  # not logged in


def test_a_lockout_holds_one_address_only(client, boss):
    for _ in range(5):
        login(client, "wrong-password", address="203.0.113.7")
    assert login(client, PASSWORD, address="203.0.113.7").status_code == 429
    assert login(client, PASSWORD, address="198.51.100.9").status_code == 302


def test_a_successful_login_clears_the_failures(client, boss):
    for _ in range(4):
        login(client, "wrong-password")
    assert login(client, PASSWORD).status_code == 302
    client.logout()
    for _ in range(4):
        login(client, "wrong-password")
    assert login(client, PASSWORD).status_code == 302  # 8 failures, never 5 in a row


def test_the_lockout_is_visible_to_an_operator_in_the_admin(client, boss):
    for _ in range(5):
        login(client, "wrong-password", address="203.0.113.7")
    operator = get_user_model().objects.create_superuser("ops", password="another-Long-pass-9")
    client.force_login(operator)
    attempts = client.get("/admin/axes/accessattempt/")
    assert attempts.status_code == 200
    html = attempts.content.decode()
    assert "boss" in html and "203.0.113.7" in html and ">5<" in html  # failures counted
    assert "wrong-password" not in html  # axes keeps no password
