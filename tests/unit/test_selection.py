"""Choosing a proxy for a gateway client's connection (gateway_runtime/selection.py): the
client's restrictions and the username's parameters, least loaded first, sticky sessions with
their lifetime, idle clock, flex and strict modes and error threshold, the bounded table."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta

import pytest

from gateway_runtime.candidates import CandidateIndex
from gateway_runtime.selection import Chosen, Decision, Refusal, Selector
from gateway_runtime.snapshot_store import SnapshotStore
from gateway_runtime.username import ClientRequest, FailureMode
from gateway_runtime.wire import GatewayClient, make_verifier
from tests.unit.test_snapshot_store import SEC, T0, Clock, proxy, snapshot

VERIFIER = make_verifier("pp_0123456789ab_" + "k" * 40, b"s" * 16)


def client(**limits) -> GatewayClient:
    return GatewayClient("shop", (VERIFIER,), 100, 100, **limits)


def region_proxy(
    pid, region="us", protocol="http", upstream="u1", maximum=2, carrier=None, lease_s=3600
):
    return replace(
        proxy(pid, maximum=maximum, lease_s=lease_s),
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


def test_one_client_making_sessions_by_the_thousand_drops_only_its_own(world):
    clock, store, _ = world
    selector = Selector(store, clock, max_sessions=10, max_sessions_per_client=4)
    view = store.view()
    other = replace(client(), name="other")

    def decide(owner: GatewayClient, sid: str) -> Decision:
        result = chosen(selector.choose(view, owner, ClientRequest(owner.name, session=sid)))
        store.release(result.ticket, active=False)
        return result.decision

    assert decide(other, "keep") is Decision.NEW
    for n in range(50):
        decide(client(), f"s{n}")
    assert decide(other, "keep") is Decision.HIT  # not pushed out by shop's sessions
    assert decide(client(), "s49") is Decision.HIT  # shop keeps its newest four
    assert decide(client(), "s45") is Decision.NEW  # its older ones went
    assert len(selector._sessions) <= 5


def test_a_session_never_outlives_its_proxys_use(world):
    clock, store, selector = world
    view = store.view()
    sticky = ClientRequest("shop", session="long", session_lifetime=timedelta(hours=24))
    first = chosen(selector.choose(view, client(), sticky))
    store.release(first.ticket, active=False)
    clock.now = T0 + 600 * SEC  # the proxies' usable_until
    assert selector.choose(view, client(), sticky) is Refusal.NO_CAPACITY


# ------------------------------------------------------------------ at scale (the request path)
def many(count, maximum=10, lease_s=3600):
    return [region_proxy(f"p{i:05d}", maximum=maximum, lease_s=lease_s) for i in range(count)]


def fresh_world(*proxies, seed=7):
    clock = Clock()
    store = SnapshotStore(clock)
    assert store.install(snapshot(1, *proxies, staleness_s=3600)).taken
    return clock, store, Selector(store, clock, rng=random.Random(seed))


def test_load_is_spread_not_piled_on_the_first_with_room():
    _, store, selector = fresh_world(*many(100, maximum=10))
    view = store.view()
    for _ in range(500):
        chosen(selector.choose(view, client(), ClientRequest("shop")))
    loads = [store.load(f"p{i:05d}") for i in range(100)]
    # The first with room would leave 50 proxies full and 50 idle; one random draw lets some
    # reach 10 and leaves a third far from the mean of 5; the less loaded of two keeps every
    # proxy within a few of it.
    assert max(loads) <= 8
    assert sum(3 <= load <= 7 for load in loads) >= 95


def test_the_one_proxy_with_room_among_10000_full_ones_is_found_then_none():
    _, store, selector = fresh_world(*many(10_000, maximum=1))
    view = store.view()
    for pid in view.proxies:
        if pid != "p04321":
            assert store.reserve(view, pid)
    assert chosen(selector.choose(view, client(), ClientRequest("shop"))).proxy.proxy_id == (
        "p04321"
    )
    assert selector.choose(view, client(), ClientRequest("shop")) is Refusal.NO_CAPACITY


def test_never_a_proxy_past_its_lease_excluded_or_outside_the_request():
    clock, store, selector = fresh_world(
        *many(30, lease_s=60),  # expired by the time of the choices
        *[replace(p, proxy_id=f"ok{i}") for i, p in enumerate(many(30))],
        *[replace(p, proxy_id=f"de{i}", region="de") for i, p in enumerate(many(30))],
    )
    clock.now = T0 + 60 * SEC
    view = store.view()
    excluded = frozenset({"ok0", "ok1", "ok2"})
    picks = set()
    for _ in range(200):
        result = chosen(
            selector.choose(view, client(), ClientRequest("shop", region="us"), excluded)
        )
        store.release(result.ticket, active=False)
        picks.add(result.proxy.proxy_id)
    assert picks == {f"ok{i}" for i in range(3, 30)}


def test_a_new_snapshot_is_chosen_from_at_once_and_an_old_view_starts_nothing():
    _, store, selector = fresh_world(*many(20))
    old = store.view()
    assert chosen(selector.choose(old, client(), ClientRequest("shop"))).proxy.proxy_id[0] == "p"
    new_ones = [replace(p, proxy_id=f"n{i}") for i, p in enumerate(many(20))]
    store.install(snapshot(2, *new_ones, staleness_s=3600))
    picked = chosen(selector.choose(store.view(), client(), ClientRequest("shop")))
    assert picked.proxy.proxy_id.startswith("n")
    assert selector.choose(old, client(), ClientRequest("shop")) is Refusal.NO_CAPACITY
    only_de = client(allowed_regions=frozenset({"de"}))
    assert selector.choose(old, only_de, ClientRequest("shop", region="us")) is Refusal.FORBIDDEN


def test_a_candidate_list_is_kept_per_key_and_bounded():
    proxies = many(10) + [replace(p, proxy_id=f"de{i}", region="DE") for i, p in enumerate(many(5))]
    _, store, _ = fresh_world(*proxies)
    index = CandidateIndex(store.holds(store.view()), max_keys=2)
    de = index.candidates(client(), ClientRequest("shop", region="de"))
    assert sorted(h.proxy_id for h in de) == [f"de{i}" for i in range(5)]
    assert index.candidates(client(), ClientRequest("shop", region="de")) is de  # kept
    assert index.candidates(client(), ClientRequest("shop", region="fr")) == ()
    only_us = client(allowed_regions=frozenset({"US"}), allowed_protocols=frozenset({"http"}))
    assert len(index.candidates(only_us, ClientRequest("shop"))) == 10
    assert index.candidates(only_us, ClientRequest("shop", region="de")) is None  # forbidden
    assert index.candidates(client(), ClientRequest("shop", region="de")) is not de  # dropped


def test_the_candidate_lists_are_bounded_in_proxies_and_one_per_spelling():
    _, store, _ = fresh_world(*many(10))
    index = CandidateIndex(store.holds(store.view()), max_entries=15)
    us = index.candidates(client(), ClientRequest("shop", region="us"))
    assert len(us) == 10
    assert index.candidates(client(), ClientRequest("shop", region="US")) is us  # one key
    everything = index.candidates(client(), ClientRequest("shop"))  # 20 > 15: us dropped
    assert len(everything) == 10
    assert index.candidates(client(), ClientRequest("shop", region="uS")) is not us
