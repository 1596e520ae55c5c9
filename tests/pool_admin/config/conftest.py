"""Fixtures for the configuration app: fresh Fernet keys, sample rows, a logged-in superuser."""

from types import SimpleNamespace

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth import get_user_model
from django.urls import reverse

from pool_admin.config.models import ApiClient, Credential, ProviderAccount, Upstream, WorkerGroup

SECRET = "test-provider-token-7Qx9!s3cr3t"


@pytest.fixture
def keys(settings):
    """Two fresh keys; only ``old`` is configured until a test changes the setting."""
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.POOL_SECRET_KEYS = (old,)
    return SimpleNamespace(old=old, new=new)


@pytest.fixture
def credential(keys):
    row = Credential(name="acme-api", username="acct-42")
    row.set_secret(SECRET)
    row.save()
    return row


@pytest.fixture
def account(credential):
    return ProviderAccount.objects.create(name="acme", credential=credential)


@pytest.fixture
def upstream(account):
    return Upstream.objects.create(
        name="acme-us",
        account=account,
        endpoint_url="https://api.acme.example/v1/proxies",
        request_params={"country": "us", "count": 50},
        default_region="us",
    )


@pytest.fixture
def api_client(upstream):
    client = ApiClient.objects.create(name="crawler-1", allowed_regions=["us"])
    client.allowed_upstreams.add(upstream)
    return client


@pytest.fixture
def worker_group(upstream):
    group = WorkerGroup.objects.create(name="edge-eu", target_capacity=200)
    group.allowed_upstreams.add(upstream)
    return group


@pytest.fixture
def boss(client):
    """The test client, logged in as a superuser."""
    user = get_user_model().objects.create_superuser("boss", password="a-Long-pass-123")
    client.force_login(user)
    return user


def url(model, view, *args):
    """An admin page of a configuration model."""
    return reverse(f"admin:config_{model._meta.model_name}_{view}", args=args)
