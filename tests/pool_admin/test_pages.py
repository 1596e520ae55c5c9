"""Admin, OpenAPI schema and docs render through the real URLconf."""

import pytest


def test_admin_login_page_renders_with_the_product_title(client):
    response = client.get("/admin/login/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Proxy Pool" in html
    assert "Django administration" not in html


def test_admin_index_redirects_anonymous_users_to_login(client):
    response = client.get("/admin/")
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


@pytest.mark.django_db
def test_admin_login_works_for_a_superuser(client, django_user_model):
    django_user_model.objects.create_superuser("boss", password="a-Long-pass-123")
    response = client.post(
        "/admin/login/?next=/admin/", {"username": "boss", "password": "a-Long-pass-123"}
    )
    assert response.status_code == 302
    assert client.get("/admin/").status_code == 200


def test_openapi_schema_and_docs(client):
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"Proxy Pool API" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"swagger-ui" in docs.content
