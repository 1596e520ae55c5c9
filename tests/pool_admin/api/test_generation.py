"""The pool generation in extract answers and call log lines (docs/API.md, "When the pool's Redis
restarts"); what a restart does to it is proven against a real restarted Redis in
tests/activity/test_redis_generation.py."""

from __future__ import annotations

import json
import logging

import pytest

from activity import ExtractRequest
from pool_admin.api.call_log import call_lines, flush_call_log
from pool_admin.bootstrap import get_pool

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]

URL = "/api/v1/extract"


def test_every_extract_answer_and_call_log_line_names_the_pools_generation(
    api, make_client, seed, caplog
):
    seed(n=3)
    client = api(make_client().plaintext)
    caplog.set_level(logging.INFO, logger="pool_admin.calls")
    body = {"count": 1, "mode": "partial"}
    first = client.post(URL, body, format="json", headers={"Idempotency-Key": "g-1"})
    replay = client.post(URL, body, format="json", headers={"Idempotency-Key": "g-1"})
    other = client.post(URL, {"count": 5, "mode": "partial"}, format="json")
    assert first.status_code == replay.status_code == other.status_code == 200
    pool_generation = get_pool().extract(ExtractRequest("probe", 1)).generation
    assert first.json()["generation"] == pool_generation
    assert replay.json()["replayed"] is True
    assert replay.json()["generation"] == other.json()["generation"] == pool_generation

    flush_call_log()
    logged = call_lines([r.getMessage() for r in caplog.records if r.name == "pool_admin.calls"])
    events = [json.loads(line.removeprefix("call ")) for line in logged]
    assert [e["generation"] for e in events] == [pool_generation] * 3
