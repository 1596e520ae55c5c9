"""/healthz and /readyz against real servers (a stopped Redis, a closed PostgreSQL port)."""

import pytest

from pool_admin import readiness
from pool_admin.localservices import free_port


def test_healthz_is_ok_without_io(client, monkeypatch):
    # No django_db mark, so any database access would raise; the checks must not run either.
    monkeypatch.setattr(readiness, "CHECKS", {"boom": lambda: pytest.fail("healthz did I/O")})
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
@pytest.mark.redis
@pytest.mark.postgres
def test_readyz_ready_when_both_answer(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "checks": {"postgres": "ok", "redis": "ok"}}
    assert response["Cache-Control"].startswith("max-age=0")


@pytest.mark.django_db
@pytest.mark.fault
def test_readyz_names_redis_when_it_is_down(client, settings, private_redis):
    server = private_redis()
    settings.REDIS_URL = server.url
    assert client.get("/readyz").status_code == 200
    server.stop()

    response = client.get("/readyz")

    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"] == {"postgres": "ok", "redis": "unavailable"}
    assert body["errors"] == {"redis": "ConnectionError"}
    assert str(server.port) not in response.content.decode()


@pytest.mark.django_db
def test_readyz_names_postgres_when_it_is_unreachable(client, monkeypatch):
    closed = free_port()  # nothing listens there: a real refused connection
    target = {
        **readiness.postgres_target(),
        "host": "127.0.0.1",
        "port": closed,
        "password": "pw-x",
    }
    monkeypatch.setattr(readiness, "postgres_target", lambda: target)

    response = client.get("/readyz")

    assert response.status_code == 503
    body = response.json()
    assert body["checks"] == {"postgres": "unavailable", "redis": "ok"}
    assert body["errors"] == {"postgres": "OperationalError"}
    text = response.content.decode()
    assert "pw-x" not in text and str(closed) not in text
