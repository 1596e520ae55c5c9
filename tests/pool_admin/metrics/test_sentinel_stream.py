"""The usage stream's producer on a Redis that Sentinel fails over
(``METRICS_REDIS_URL=redis+sentinel://...``): it never fails its caller, counts what it could
not send while there was no master, and sends again by itself to the new master."""

from __future__ import annotations

import time

import orjson
import pytest
import redis
from django.test import override_settings

from pool_admin.metrics.stream import EventStream
from tests.harness.sentinel import SentinelDeployment

pytestmark = [pytest.mark.fault, pytest.mark.slow]

#: From the primary's death to the first flush the new master takes.
FOLLOW_WITHIN_S = 10.0


def _emit(stream: EventStream, n: int) -> None:
    for _ in range(n):
        stream.emit("expired", {"upstream": "u1", "used": 1, "unused": 0})


def test_the_usage_stream_follows_a_failover_and_counts_what_it_could_not_send(
    tmp_path, settings, monkeypatch, caplog
):
    # Every drop warned at once: none left for the stream's thread (alive after the test, as
    # in any process) to warn about during another test.
    monkeypatch.setattr("pool_admin.metrics.stream.WARN_EVERY_S", 0.0)
    with (
        SentinelDeployment(tmp_path) as deployment,
        override_settings(METRICS_REDIS_URL=deployment.url),
    ):
        stream = EventStream()
        _emit(stream, 10)
        stream.flush()
        assert (stream.sent(), stream.dropped()) == (10, 0)
        old = deployment.master_port()
        deployment.synced()

        deployment.primary.kill()
        killed = time.monotonic()
        while True:
            _emit(stream, 1)
            stream.flush()  # never raises: no master yet is a drop, counted
            if stream.sent() > 10:
                break
            assert time.monotonic() - killed < FOLLOW_WITHIN_S, "the stream did not follow"
            time.sleep(0.1)
        dropped = stream.dropped()
        assert dropped >= 1  # it was really cut off
        assert "events dropped" in caplog.text  # and said so

        new = deployment.master_port()
        assert new != old
        master = redis.Redis(port=new, socket_timeout=2)
        try:
            # The entries sent before (carried over by the replica) and after, and the drops
            # told to the deployment's count on the new master.
            events = sum(
                len(orjson.loads(fields[b"e"]))
                for _, fields in master.xrange(settings.METRICS_STREAM)
            )
            assert events == stream.sent() == 11
            assert int(master.get(f"{settings.METRICS_STREAM}:dropped") or 0) == dropped
        finally:
            master.close()
