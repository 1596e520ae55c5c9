"""Choosing a proxy for a gateway client's connection (gateway_runtime/selection.py): the
client's restrictions and the username's parameters, least loaded first, sticky sessions with
their lifetime, idle clock, flex and strict modes and error threshold, the bounded table."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta

import pytest

from gateway_runtime.selection import Chosen, Decision, Refusal, Selector
from gateway_runtime.snapshot_store import SnapshotStore
from gateway_runtime.username import ClientRequest, FailureMode
from gateway_runtime.wire import GatewayClient, make_verifier
from tests.unit.test_snapshot_store import SEC, T0, Clock, proxy, snapshot

VERIFIER = make_verifier("pp_0123456789ab_" + "k" * 40, b"s" * 16)


def client(**limits) -> GatewayClient:
    return GatewayClient("shop", (VERIFIER,), 100, 100, **limits)


def region_proxy(pid, region="us", protocol="http", upstream="u1", maximum=2, carrier=None):
    return replace(
        proxy(pid, maximum=maximum, lease_s=3600),
        region=region, protocol=protocol, upstream=upstream, carrier=carrier,
    )  # fmt: skip


@pytest.fixture
def world():
    clock = Clock()
    store = SnapshotStore(clock)
    store.install(
        snapshot(
            1,
            region_proxy("us-1"),
            region_proxy("us-2"),
            region_proxy("de-1", region="DE"),
            region_proxy("socks", region="gb", protocol="socks5", carrier="ATT"),
            staleness_s=3600,
        )
    )
    selector = Selector(store, clock, rng=random.Random(7))
    return clock, store, selector


def chosen(result) -> Chosen:
    assert isinstance(result, Chosen), result
    return result


def test_the_parameters_and_the_clients_restrictions_narrow_the_choice(world):
    _, store, selector = world
    view = store.view()
    assert (
        chosen(selector.choose(view, client(), ClientRequest("shop", region="de"))).proxy.proxy_id
        == "de-1"
    )
    socks = ClientRequest("shop", protocol="socks5", carrier="att")
    assert chosen(selector.choose(view, client(), socks)).proxy.proxy_id == "socks"
    only_us = client(allowed_regions=frozenset({"US"}))
    assert chosen(selector.choose(view, only_us, ClientRequest("shop"))).proxy.region == "us"
    assert selector.choose(view, only_us, ClientRequest("shop", region="de")) is Refusal.FORBIDDEN
    http_only = client(allowed_protocols=frozenset({"http"}))
    assert selector.choose(view, http_only, socks) is Refusal.FORBIDDEN
    assert (
        selector.choose(view, client(), ClientRequest("shop", region="fr")) is Refusal.NO_CAPACITY
    )


def test_least_loaded_first_and_full_proxies_skipped(world):
    _, store, selector = world
    view = store.view()
    us = ClientRequest("shop", region="us")
    picks = [chosen(selector.choose(view, client(), us)).proxy.proxy_id for _ in range(4)]
    assert sorted(picks) == ["us-1", "us-1", "us-2", "us-2"]  # spread, 2 each at most
    assert selector.choose(view, client(), us) is Refusal.NO_CAPACITY
    assert chosen(selector.choose(view, client(), ClientRequest("shop", region="de")))
    retry = selector.choose(view, client(), ClientRequest("shop", region="de"), frozenset({"de-1"}))
    assert retry is Refusal.NO_CAPACITY  # never back to an exit that failed for this request


def test_a_sticky_session_keeps_its_proxy_until_its_lifetime_or_idle_ends(world):
    clock, store, selector = world
    view = store.view()
    sticky = ClientRequest("shop", region="us", session="a1", session_lifetime=timedelta(minutes=2))
    first = chosen(selector.choose(view, client(), sticky))
    assert first.decision is Decision.NEW
    store.release(first.ticket, active=False)
    for _ in range(3):
        clock.now += 30 * SEC
        again = chosen(selector.choose(view, client(), sticky))
        assert (again.proxy.proxy_id, again.decision) == (first.proxy.proxy_id, Decision.HIT)
        store.release(again.ticket, active=False)
    clock.now += 31 * SEC  # past its 2-minute lifetime
    assert chosen(selector.choose(view, client(), sticky)).decision is Decision.NEW
    other = ClientRequest("shop", session="b2")
    b = chosen(selector.choose(view, client(), other))
    store.release(b.ticket, active=False)
    clock.now += 61 * SEC  # idle past 60 s
    assert chosen(selector.choose(view, client(), other)).decision is Decision.NEW


def test_when_the_sticky_proxy_is_gone_flex_moves_and_strict_refuses(world):
    _, store, selector = world
    flex = ClientRequest("shop", region="us", session="f")
    strict = ClientRequest("shop", region="us", session="s", failure_mode=FailureMode.STRICT)
    held = set()
    for request in (flex, strict):
        first = chosen(selector.choose(store.view(), client(), request))
        held.add(first.proxy.proxy_id)
        store.release(first.ticket, active=False)
    # The next snapshot leaves out the sessions' proxies and brings a new one.
    rest = [region_proxy(p) for p in ("us-1", "us-2") if p not in held]
    store.install(snapshot(2, *rest, region_proxy("us-3"), staleness_s=3600))
    moved = chosen(selector.choose(store.view(), client(), flex))
    assert moved.decision is Decision.MOVED and moved.proxy.proxy_id not in held
    assert selector.choose(store.view(), client(), strict) is Refusal.STICKY_GONE


def test_an_error_threshold_moves_a_session_even_when_strict(world):
    _, store, selector = world
    view = store.view()
    request = ClientRequest("shop", region="us", session="e", failure_mode=FailureMode.STRICT,
                            max_errors=2)  # fmt: skip
    first = chosen(selector.choose(view, client(), request))
    store.release(first.ticket, active=False)
    selector.failed("shop", "e")
    assert chosen(selector.choose(view, client(), request)).decision is Decision.HIT
    selector.failed("shop", "e")
    moved = chosen(selector.choose(view, client(), request))
    assert moved.decision is Decision.MOVED


def test_the_session_table_is_bounded_the_least_recently_used_dropped(world):
    clock, store, _ = world
    selector = Selector(store, clock, max_sessions=2)
    view = store.view()
    for sid in ("a", "b", "c"):
        result = chosen(selector.choose(view, client(), ClientRequest("shop", session=sid)))
        store.release(result.ticket, active=False)
    assert (
        chosen(selector.choose(view, client(), ClientRequest("shop", session="a"))).decision
        is Decision.NEW
    )
    assert (
        chosen(selector.choose(view, client(), ClientRequest("shop", session="c"))).decision
        is Decision.HIT
    )


def test_a_session_never_outlives_its_proxys_use(world):
    clock, store, selector = world
    view = store.view()
    sticky = ClientRequest("shop", session="long", session_lifetime=timedelta(hours=24))
    first = chosen(selector.choose(view, client(), sticky))
    store.release(first.ticket, active=False)
    clock.now = T0 + 600 * SEC  # the proxies' usable_until
    assert selector.choose(view, client(), sticky) is Refusal.NO_CAPACITY
