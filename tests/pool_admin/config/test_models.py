"""Model validation: bad input gives clear errors and saves nothing; history records changes."""

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db.models import ProtectedError

from activity._validation import token as activity_token
from activity.errors import InvalidRequest
from activity.scheduler import AccountLimits
from pool_admin.config.models import (
    ApiClient,
    Credential,
    ProviderAccount,
    Upstream,
    WorkerGroup,
    validate_label,
)

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

GOOD = {"name": "acme-us", "endpoint_url": "https://api.acme.example/v1/proxies"}


def errors_of(make, **fields):
    """Field -> messages of the ValidationError that saving raises."""
    with pytest.raises(ValidationError) as info:
        make(**fields)
    return info.value.message_dict


def create_upstream(**fields):
    account, _ = ProviderAccount.objects.get_or_create(name="acme")
    return Upstream.objects.create(**{**GOOD, "account": account, **fields})


@pytest.mark.parametrize(
    "value",
    ["us", "a", "eu-west.1", "user@host:8080", "a+b", "A" * 64, "9lives"],
)
def test_token_rule_accepts_what_the_pool_accepts(value):
    validate_label(value)
    assert activity_token(value, "label") == value


@pytest.mark.parametrize(
    "value",
    ["", "-lead", ".dot", "has space", "a/b", "tab\t", "x" * 65, "ünïcode", "trail\n", "a,b"],
)
def test_token_rule_refuses_what_the_pool_refuses(value):
    with pytest.raises(ValidationError, match="valid label"):
        validate_label(value)
    with pytest.raises(InvalidRequest):
        activity_token(value, "label")


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"name": "bad name"}, "name", "Enter a valid label"),
        ({"default_region": "eu west"}, "default_region", "Enter a valid label"),
        ({"default_carrier": "-att"}, "default_carrier", "Enter a valid label"),
        ({"default_protocol": "ftp"}, "default_protocol", "is not a valid choice"),
        ({"kind": "xml"}, "kind", "is not a valid choice"),
        ({"max_size": -1}, "max_size", "greater than or equal to 1"),
        ({"max_size": 0}, "max_size", "greater than or equal to 1"),
        ({"safety_margin_s": -5}, "safety_margin_s", "greater than or equal to 0"),
        ({"default_ttl_s": 90_000}, "default_ttl_s", "less than or equal to 86400"),
        ({"check_timeout_ms": 10}, "check_timeout_ms", "greater than or equal to 100"),
        ({"default_ttl_s": 10, "safety_margin_s": 10}, "safety_margin_s", "shorter than"),
        (
            {"check_interval_s": 2, "check_timeout_ms": 5_000},
            "check_timeout_ms",
            "must not exceed",
        ),
        ({"endpoint_url": "ftp://files.example/x"}, "endpoint_url", "http"),
        ({"endpoint_url": "https://u:pw@api.example/"}, "endpoint_url", "user name or password"),
        (
            {"endpoint_url": "https://api.example/?api_key=abc"},
            "endpoint_url",
            "looks like a secret",
        ),
        ({"request_params": ["x"]}, "request_params", "JSON object"),
        ({"request_params": {"token": "abc"}}, "request_params", "looks like a secret"),
        ({"request_params": {"accessToken": "abc"}}, "request_params", "looks like a secret"),
        ({"request_params": {"X-Auth": "abc"}}, "request_params", "looks like a secret"),
        ({"request_params": {"nested": {"a": 1}}}, "request_params", "must be a string"),
        ({"check_url": "gopher://x.example/"}, "check_url", "http"),
        ({"fetch_timeout_s": 0}, "fetch_timeout_s", "greater than or equal to 1"),
        ({"label_map": {"city": {}}}, "label_map", "region and carrier only"),
        ({"label_map": {"region": {"广州": ""}}}, "label_map", "not a label to a label"),
        ({"fetch_timeout_s": 121}, "fetch_timeout_s", "less than or equal to 120"),
        ({"fetch_timeout_s": 31, "default_ttl_s": 60}, "fetch_timeout_s", "half the default"),
    ],
)
def test_upstream_validation_errors_name_the_field_and_save_nothing(fields, field, message):
    errors = errors_of(create_upstream, **fields)
    assert field in errors
    assert any(message.lower() in text.lower() for text in errors[field]), errors
    assert not Upstream.objects.exists()


def test_upstream_defaults_are_valid_and_printable():
    params = {"country": "us", "tags": ["a", 1], "author": "x", "sort": "asc", "keyword": "y"}
    upstream = create_upstream(request_params=params)
    assert str(upstream) == "acme-us"
    assert upstream.default_protocol == "http"
    assert upstream.safety_margin.total_seconds() == 5
    assert upstream.default_ttl.total_seconds() == 300
    assert upstream.created_at and upstream.updated_at


def test_duplicate_upstream_name_is_a_validation_error():
    create_upstream()
    errors = errors_of(create_upstream)
    assert "already exists" in errors["name"][0]
    assert Upstream.objects.count() == 1


def test_unknown_field_type_still_gives_field_errors_not_a_crash():
    errors = errors_of(create_upstream, default_ttl_s="soon", safety_margin_s="later")
    assert set(errors) >= {"default_ttl_s", "safety_margin_s"}


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"name": "two words"}, "name", "Enter a valid label"),
        ({"requests_per_second": -1}, "requests_per_second", "greater than or equal to 1"),
        ({"proxies_per_minute": 0}, "proxies_per_minute", "greater than or equal to 1"),
        ({"max_count_per_request": 5_000}, "max_count_per_request", "less than or equal to 1000"),
        ({"gateway_reserve": -1}, "gateway_reserve", "greater than or equal to 0"),
        ({"idempotency_ttl_s": 0}, "idempotency_ttl_s", "greater than or equal to 1"),
        ({"allowed_regions": ["us", "eu  west"]}, "allowed_regions", "Not a region label"),
        ({"allowed_regions": ["r" * 65]}, "allowed_regions", "Not a region label"),
        ({"allowed_protocols": ["http", "ftp"]}, "allowed_protocols", "Unknown protocol 'ftp'"),
    ],
)
def test_api_client_validation(fields, field, message):
    errors = errors_of(ApiClient.objects.create, **{"name": "crawler", **fields})
    assert any(message in text for text in errors[field]), errors
    assert not ApiClient.objects.exists()


def test_api_client_regions_are_vendors_labels_and_repeats_in_any_case_go():
    client = ApiClient.objects.create(
        name="crawler", allowed_regions=["US", "广东省广州市", "us", "United States"]
    )
    client.refresh_from_db()
    assert client.allowed_regions == ["US", "广东省广州市", "United States"]


def test_api_client_lists_drop_repeats():
    client = ApiClient.objects.create(
        name="crawler", allowed_regions=["us", "de", "us"], allowed_protocols=["socks5"] * 2
    )
    client.refresh_from_db()
    assert client.allowed_regions == ["us", "de"]
    assert client.allowed_protocols == ["socks5"]
    assert client.gateway_reserve == 0


def test_worker_group_validation():
    errors = errors_of(WorkerGroup.objects.create, name="g/1", target_capacity=-3)
    assert set(errors) == {"name", "target_capacity"}
    assert not WorkerGroup.objects.exists()
    assert str(WorkerGroup.objects.create(name="g1", target_capacity=0)) == "g1"


def test_credential_needs_a_secret(keys):
    errors = errors_of(Credential.objects.create, name="acme")
    assert errors == {"secret": ["Enter the secret."]}
    row = Credential(name="acme")
    with pytest.raises(ValidationError):
        row.set_secret("")
    assert not Credential.objects.exists()


def test_ordering_is_by_name():
    for name in ("zeta", "alpha", "mid"):
        create_upstream(name=name)
        WorkerGroup.objects.create(name=name)
    assert [u.name for u in Upstream.objects.all()] == ["alpha", "mid", "zeta"]
    assert [g.name for g in WorkerGroup.objects.all()] == ["alpha", "mid", "zeta"]


def test_history_records_each_change_and_m2m(api_client, upstream):
    user = get_user_model().objects.create_user("ops")
    api_client._history_user = user
    api_client.requests_per_second = 7
    api_client.save()
    latest = api_client.history.first()
    assert latest.requests_per_second == 7 and latest.history_user == user
    previous = latest.prev_record
    delta = latest.diff_against(previous)
    assert "requests_per_second" in delta.changed_fields

    before = api_client.history.count()
    api_client.allowed_upstreams.clear()
    assert api_client.history.count() == before + 1
    assert list(api_client.history.first().allowed_upstreams.all()) == []
    assert [u.upstream for u in previous.allowed_upstreams.all()] == [upstream]


def test_credential_history_never_holds_ciphertext(credential):
    history_model = Credential.history.model
    assert "ciphertext" not in {f.name for f in history_model._meta.fields}
    credential.set_secret("another-secret-value")
    credential.save()
    assert [h.version for h in credential.history.all()] == [2, 1]


def test_an_account_gives_the_scheduler_its_limits_and_refuses_out_of_range_ones():
    account = ProviderAccount.objects.create(
        name="kdl", api_calls_per_second=10, api_calls_per_minute=300, fetch_concurrency=2
    )
    assert account.limits == AccountLimits(
        concurrency=2, calls_per_second=10, calls_per_minute=300, proxies_per_minute=1_000
    )
    for fields, field in (
        ({"api_calls_per_second": 101}, "api_calls_per_second"),
        ({"api_calls_per_minute": 0}, "api_calls_per_minute"),
        ({"fetch_concurrency": 65}, "fetch_concurrency"),
        ({"name": "bad name"}, "name"),
    ):
        errors = errors_of(ProviderAccount.objects.create, **{"name": "other", **fields})
        assert field in errors
    assert list(ProviderAccount.objects.values_list("name", flat=True)) == ["kdl"]


def test_an_account_with_upstreams_cannot_be_deleted():
    upstream = create_upstream()
    with pytest.raises(ProtectedError):
        upstream.account.delete()
    upstream.delete()
    upstream.account.delete()


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"kind": "preset"}, "preset", "Choose the vendor's preset"),
        ({"kind": "json_list", "preset": "zhima_getip_json"}, "preset", "for the preset kind"),
        ({"kind": "preset", "preset": "nope"}, "preset", "is not a valid choice"),
        (
            {"kind": "preset", "preset": "zhima_getip_json", "expiry_zone": "Mars/Olympus"},
            "expiry_zone",
            "IANA time zone",
        ),
        ({"low_water_mark": 2_000, "max_size": 1_000}, "low_water_mark", "must not exceed"),
        ({"fetch_interval_s": 0}, "fetch_interval_s", "greater than or equal to 1"),
        ({"refill_cooldown_s": 3_601}, "refill_cooldown_s", "less than or equal to 3600"),
    ],
)
def test_how_an_upstream_reads_its_answers_is_checked_before_it_is_saved(fields, field, message):
    errors = errors_of(create_upstream, **fields)
    assert field in errors and message.lower() in " ".join(errors[field]).lower(), errors
    assert not Upstream.objects.exists()


def test_every_preset_can_be_chosen_with_the_defaults():
    from activity.providers.presets import PRESETS

    for n, name in enumerate(PRESETS):
        create_upstream(name=f"u{n}", kind="preset", preset=name, expiry_zone="Asia/Shanghai")
    assert Upstream.objects.count() == len(PRESETS)


@pytest.mark.parametrize(
    ("kind", "reader", "message"),
    [
        ("json_list", {"fields": {"host": "ip"}}, "list_path is required"),
        ("json_list", {"list_path": "data", "fields": {"hots": "ip"}}, "fields may name"),
        ("json_list", {"list_path": "data", "expiry": "tomorrow"}, "expiry must be one of"),
        ("json_list", {"list_path": "data", "colour": "red"}, "unknown settings"),
        ("text_lines", {"line": "ip|port"}, "line must be one of"),
        ("preset", {"line": "host:port"}, "leave this empty"),
    ],
)
def test_a_generic_reader_that_cannot_read_an_answer_is_refused(kind, reader, message):
    fields = {"kind": kind, "reader": reader}
    if kind == "preset":
        fields["preset"] = "zhima_getip_json"
    errors = errors_of(create_upstream, **fields)
    assert message in " ".join(errors["reader"]), errors
    assert not Upstream.objects.exists()


def test_generic_readers_build_from_their_settings():
    json_up = create_upstream(name="j", kind="json_list", reader={
        "list_path": "data.proxy_list", "fields": {"host": "ip", "port": "port",
        "expiry": "expire_time"}, "expiry": "unix_seconds", "success_path": "code",
    })  # fmt: skip
    text_up = create_upstream(name="t", kind="text_lines", reader={"line": "host:port:user:pass"})
    assert json_up.answer_format().list_path == "data.proxy_list"
    assert text_up.answer_format().line.value == "host:port:user:pass"
    bare = create_upstream(name="b")  # a generic upstream without a reader: kept, not readable
    with pytest.raises(ValueError, match="list_path is required"):
        bare.answer_format()


def test_a_static_list_needs_its_credential_and_other_kinds_their_endpoint(credential):
    errors = errors_of(create_upstream, kind="static_list", endpoint_url="")
    assert "Choose the credential" in " ".join(errors["static_list"])
    errors = errors_of(create_upstream, static_list=credential)
    assert "static-list kind only" in " ".join(errors["static_list"])
    errors = errors_of(create_upstream, endpoint_url="")
    assert "endpoint_url" in errors
    fixed = create_upstream(kind="static_list", endpoint_url="", static_list=credential)
    assert fixed.answer_format().line.value == "host:port"  # the reader's default line shape
