"""The console's history: the usage aggregates as series over the window picked, bounded, for
one upstream or all; bad choices answered with a 400."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest

from pool_admin.console.history import WINDOWS, history
from pool_admin.metrics.aggregates import apply_events
from pool_admin.metrics.events import Event

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.redis]

PAGE = "/admin/console/history/"


def chart(data: dict, name: str) -> dict:
    return next(c for c in data["charts"] if c["id"] == name)


def test_series_add_up_to_the_aggregates_in_their_steps(world):
    data = history("1h", None)
    assert len(data["labels"]) == 60 and data["step_s"] == 60
    assert sum(chart(data, "extracts")["series"]["proxies extracted"]) == 8
    assert sum(chart(data, "fetched")["series"]["fetched"]) == 20
    assert chart(data, "dropped")["series"] == {"bad_port": [0] * 59 + [1]}
    checks = chart(data, "checks")["series"]
    assert (sum(checks["available"]), sum(checks["unhealthy"])) == (8, 2)
    assert chart(data, "latency")["series"]["ms"][-1] == 40  # 400 ms over 10 timed checks
    expired = chart(data, "expired")["series"]
    assert (sum(expired["never used"]), sum(expired["used"])) == (3, 1)
    # One upstream's only; older figures fall in their own step of a longer window.
    assert sum(chart(history("1h", "acme-eu"), "fetched")["series"]["fetched"]) == 0
    ms = int((datetime.now(UTC) - timedelta(days=3)).timestamp() * 1000)
    apply_events([Event("fetch", ms, {"upstream": "acme-eu", "received": 5, "inserted": 5,
                                      "refreshed": 0, "available": 5})])  # fmt: skip
    week = history("7d", "acme-eu")
    assert len(week["labels"]) == 168
    assert sum(chart(week, "fetched")["series"]["fetched"]) == 5
    assert sum(chart(history("24h", "acme-eu"), "fetched")["series"]["fetched"]) == 0


def test_every_window_is_bounded():
    for key, window in WINDOWS.items():
        assert len(history(key, None)["labels"]) == window.span // window.step <= 180


def test_the_page_carries_its_data_for_the_charts(client, staff, world):
    html = client.get(PAGE, {"window": "6h", "upstream": "acme-us"}).content.decode()
    data = json.loads(re.search(r'id="console-history-data" type="application/json">(.*?)</script>',
                                html, re.S).group(1))  # fmt: skip
    assert data["window"] == "6h" and len(data["labels"]) == 72
    assert re.findall(r'data-chart="([^"]+)"', html) == [c["id"] for c in data["charts"]]
    assert "chart.umd.min.js" in html  # the vendored library, from this site
    for bad in ({"window": "2y"}, {"upstream": "nope"}):
        assert client.get(PAGE, bad).status_code == 400


def test_the_gateways_traffic_has_its_charts_for_every_client_or_one_upstream():
    ms = int((datetime.now(UTC) - timedelta(minutes=2)).timestamp() * 1000)
    figures = {"requests": 4, "tunnels": 2, "bytes_up": 100, "bytes_down": 900,
               "failed_connect": 1, "failed_timeout": 0, "failed_upstream": 2,
               "failed_closed": 3}  # fmt: skip
    apply_events([
        Event("gateway_traffic", ms, {"group": "edge", "client": client, "upstream": upstream,
                                      **figures})
        for client, upstream in (("shop", "acme-us"), ("crawler", "acme-us"), ("shop", "acme-eu"))
    ])  # fmt: skip
    data = history("1h", None)
    sums = {
        name: {series: sum(values) for series, values in chart(data, name)["series"].items()}
        for name in ("gateway", "gateway_bytes", "gateway_failures")
    }
    assert sums == {
        "gateway": {"requests": 12, "tunnels": 6},
        "gateway_bytes": {"up": 300, "down": 2_700},
        "gateway_failures": {"connect": 3, "timeout": 0, "upstream": 6, "closed": 9},
    }
    one = chart(history("1h", "acme-eu"), "gateway")["series"]
    assert (sum(one["requests"]), sum(one["tunnels"])) == (4, 2)
