"""The fetch path of a running ``make run`` under hostile vendors (issue 22, "Done when").

    .venv/bin/python bench/hostile_vendors.py [--seconds 120] [--keep]

Against the platform ``make run`` runs (its PostgreSQL, Redis and pool prefix: the same
environment variables and defaults), this adds, for ``--seconds``:

* one upstream per preset (eight), each fetched from a local vendor answering in that preset's
  shape with five loopback proxies (trusted: no check, so nothing but the fetch path counts);
* four hostile upstreams of one account (fetch concurrency 4), their vendor trickling its body
  a byte every 0.1 s for 100 s (two) or never answering (two), fetched every 5 s;

and reads, every half second, each demo upstream's available slots and its scheduler status
(every finished fetch moves its next due time). It prints the demo's lowest availability and
its longest time between two finished fetches (the goal: never empty, and at most twice its
interval), each preset upstream's proxies, and the hostile upstreams' failures by kind (from
the usage counters). The upstreams and accounts it added are deleted at the end unless
``--keep``. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pool_admin.settings")
os.environ.setdefault("POOL_DEV", "1")

import django  # noqa: E402

django.setup()

from pool_admin.bootstrap import get_pool, get_scheduler  # noqa: E402
from pool_admin.config.models import ProviderAccount, Upstream, UsageTotal  # noqa: E402
from tests.harness.vendor_server import vendor_server  # noqa: E402
from tests.harness.webshare_vendor import vendor  # noqa: E402

PROXIES = 5
PRESET_ACCOUNT, HOSTILE_ACCOUNT = "probe-presets", "probe-hostile"


def _answers(now: datetime) -> dict[str, Callable[[int], bytes]]:
    """Each preset's answer with PROXIES loopback proxies from ``port``, ten minutes to live."""
    ends = now + timedelta(minutes=10)
    shanghai = ends.astimezone(ZoneInfo("Asia/Shanghai"))

    def js(document: object) -> bytes:
        return json.dumps(document).encode()

    def ports(port: int) -> range:
        return range(port, port + PROXIES)

    lines = lambda p: "\n".join(f"127.0.0.1:{n},600" for n in ports(p)).encode()  # noqa: E731
    return {
        "kuaidaili_getdps_json": lambda p: js({"code": 0, "msg": "", "data": {
            "proxy_list": [f"127.0.0.1:{n},600" for n in ports(p)]}}),
        "kuaidaili_getdps_text": lines,
        "juliang_postpay_text": lines,
        "zhima_getip_json": lambda p: js({"code": 0, "success": True, "msg": "0", "data": [
            {"ip": "127.0.0.1", "port": n, "expire_time": f"{shanghai:%Y-%m-%d %H:%M:%S}",
             "city": "广东省广州市", "isp": "电信"} for n in ports(p)]}),
        "xiequ_json": lambda p: js({"code": 0, "success": "true", "data": [
            {"IP": "127.0.0.1", "Port": n} for n in ports(p)]}),
        "webshare_list": lambda p: js({"count": PROXIES, "next": None, "results": [
            {"id": str(n), "username": f"u{n}", "password": "pw", "proxy_address": "127.0.0.1",
             "port": n, "valid": True, "country_code": "United States"} for n in ports(p)]}),
        "proxy_seller_list": lambda p: js({"status": "success", "errors": [], "data": {"items": [
            {"id": str(n), "ip": "127.0.0.1", "port_http": n, "port_socks": n + 1000,
             "login": f"l{n}", "password": "pw", "country": "DE",
             "date_end": f"{now + timedelta(days=30):%d.%m.%Y}"} for n in ports(p)]}}),
        "thordata_isp": lambda p: js({"code": 200, "msg": "ok", "data": [
            {"ip": "127.0.0.1", "port": n, "user": f"t{n}", "pwd": "pw",
             "expireTime": int((now + timedelta(days=30)).timestamp()), "country": "US"}
            for n in ports(p)]}),
    }  # fmt: skip


@contextlib.contextmanager
def vendors() -> Iterator[tuple[dict[str, str], str]]:
    """Each preset's vendor URL (tests/harness/webshare_vendor.py, answering that preset's
    shape), and the base URL of the hostile one (tests/harness/vendor_server.py: /trickle, a
    byte every 0.1 s of 1,000; /hang, no answer)."""
    answers = _answers(datetime.now(UTC))
    with contextlib.ExitStack() as stack:
        urls = {
            name: stack.enter_context(vendor(answer(31_000 + 100 * i)))
            for i, (name, answer) in enumerate(sorted(answers.items()))
        }
        yield urls, stack.enter_context(vendor_server())


def configure(urls: dict[str, str], base: str) -> None:
    presets = ProviderAccount.objects.create(
        name=PRESET_ACCOUNT, fetch_concurrency=8, proxies_per_minute=10_000
    )
    for name in sorted(urls):
        Upstream.objects.create(
            name=f"probe-{name.replace('_', '-')}", account=presets, kind="preset",
            preset=name, endpoint_url=urls[name], allow_local_hosts=True,
            trust_provider=True, max_size=20, fetch_interval_s=10,
        )  # fmt: skip
    hostile = ProviderAccount.objects.create(name=HOSTILE_ACCOUNT, fetch_concurrency=4)
    for n, path in enumerate(("/trickle", "/hang", "/trickle", "/hang")):
        Upstream.objects.create(
            name=f"probe-hostile-{n}", account=hostile, kind="preset", preset="webshare_list",
            endpoint_url=f"{base}{path}", allow_local_hosts=True, trust_provider=True,
            fetch_interval_s=5,
        )  # fmt: skip


def remove() -> None:
    for account in ProviderAccount.objects.filter(name__in=(PRESET_ACCOUNT, HOSTILE_ACCOUNT)):
        account.upstreams.all().delete()
        account.delete()  # its scheduler state goes with it (pool_admin/config/signals.py)


def failures() -> dict[tuple[str, str], int]:
    rows = UsageTotal.objects.filter(family="fetch_failures", labels__startswith="probe-hostile")
    return {tuple(r.labels.split("|")): r.value for r in rows}  # type: ignore[misc]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--keep", action="store_true", help="leave the probe upstreams")
    args = parser.parse_args()
    remove()  # an earlier run's, if it was stopped
    pool, scheduler = get_pool(), get_scheduler()
    demo = {u.name: u for u in Upstream.objects.filter(account__name="demo")}
    if not demo:
        print("no demo upstreams: run `make run` (with the demo provider) first")
        return 1
    failed_before = failures()
    lowest = {name: 1 << 30 for name in demo}
    finished: dict[str, list[float]] = {name: [] for name in demo}
    last_due: dict[str, datetime | None] = {name: None for name in demo}
    with vendors() as (urls, base):
        configure(urls, base)
        print(f"8 preset upstreams and 4 hostile ones added; watching for {args.seconds:g} s")
        started = time.monotonic()
        try:
            while time.monotonic() - started < args.seconds:
                now = datetime.now(UTC)
                for name in demo:
                    slots = pool.upstream_inventory(name).available_slots
                    lowest[name] = min(lowest[name], slots)
                    due = scheduler.status(now, "demo", name).due_at
                    if due is not None and due != last_due[name]:
                        if last_due[name] is not None:  # a fetch finished: its due moved
                            finished[name].append(time.monotonic() - started)
                        last_due[name] = due
                time.sleep(0.5)
            took = time.monotonic() - started
            print(f"\nafter {took:.0f} s:")
            print("| demo upstream | interval s | fetches finished | longest gap s | lowest "
                  "available slots |")  # fmt: skip
            print("|---|---|---|---|---|")
            for name, upstream in demo.items():
                marks = [0.0, *finished[name], took]
                gap = max(b - a for a, b in itertools.pairwise(marks))
                print(f"| {name} | {upstream.fetch_interval_s} | {len(finished[name])} "
                      f"| {gap:.1f} | {lowest[name]} |")  # fmt: skip
            print("\n| preset upstream | proxies in the pool |\n|---|---|")
            for upstream in Upstream.objects.filter(account__name=PRESET_ACCOUNT):
                print(f"| {upstream.name} | {pool.upstream_inventory(upstream.name).managed} |")
            time.sleep(6)  # the usage consumer applies the last events
            print("\n| hostile upstream | failures by kind |\n|---|---|")
            now_failed = failures()
            for n in range(4):
                name = f"probe-hostile-{n}"
                kinds = {kind: value - failed_before.get((u, kind), 0)
                         for (u, kind), value in now_failed.items() if u == name}  # fmt: skip
                print(f"| {name} | {kinds} |")
        finally:
            if not args.keep:
                remove()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
