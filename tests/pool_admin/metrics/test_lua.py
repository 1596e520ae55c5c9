"""lua/metrics/: the usage stream's function library keeps the rules of the others (the same
header test, the same loader) and names its keys under the stream's hash tag."""

from __future__ import annotations

import pytest
import redis

from activity.lua_functions import LUA_DIR
from pool_admin.metrics.consumer import ConsumerOptions
from pool_admin.metrics.group import METRICS_LIBRARY, StreamGroup, hash_tag
from tests.harness.lua import check_files_are_loaded, check_header


@pytest.mark.parametrize(("name", "path"), METRICS_LIBRARY.operations)
def test_every_operation_has_the_header_and_names_keys_only_through_the_stream(name, path):
    """The header every library's operations have; and every key it touches is named by
    lib.lua after KEYS[1] (the stream), so they share its hash tag: a key an operation named
    itself could leave the slot."""
    check_header(path, name)
    lines = path.read_text().splitlines()
    code = [line for line in lines if not line.lstrip().startswith("--")]
    assert not [line for line in code if "KEYS" in line]


def test_every_file_is_the_library_or_an_operation_it_loads():
    check_files_are_loaded(METRICS_LIBRARY, LUA_DIR / "metrics")


def test_the_deployments_keys_share_one_hash_tag():
    from pool_admin import settings as deployed  # the module: tests override django's settings

    assert hash_tag(deployed.METRICS_STREAM) == "metrics"
    assert hash_tag(deployed.METRICS_DEAD_LETTER) == "metrics"


@pytest.mark.parametrize(
    ("key", "tag"),
    [
        ("pp:{metrics}:events", "metrics"),
        ("pp:metrics:events", None),
        ("a:{}:b{c}", None),
        ("{x}:{y}", "x"),
        ("a{b", None),
    ],
)
def test_hash_tag_is_redis_clusters(key, tag):
    assert hash_tag(key) == tag


def test_a_stream_key_without_a_hash_tag_is_refused():
    client = redis.Redis()  # never connects: the key is refused first
    with pytest.raises(ValueError, match="hash tag"):
        StreamGroup(client, "pp:metrics:events", "aggregates", "c1")
    with pytest.raises(ValueError, match="hash tag"):
        ConsumerOptions(stream="pp:{metrics}:events", group="g", dead_letter="pp:dead")
