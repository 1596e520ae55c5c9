"""What a worker carried (gateway_runtime/traffic.py): a live record per (client, upstream)
pair the server increments, takes of what each gained since the previous take (never lost,
never twice, at most so many a take, in turn), records a connection holds kept across takes,
the others let go, and the table's bound (pairs past it counted under OTHER)."""

from __future__ import annotations

import random

from gateway_runtime.traffic import TrafficCounter
from gateway_runtime.wire import (
    TRAFFIC_COUNTS,
    ClientTraffic,
    RuntimeReportBody,
    decode_report,
    encode_report,
)
from gateway_runtime.wire.limits import MAX_COUNTER, MAX_TRAFFIC_ENTRIES, OTHER


def figures(taken: tuple[ClientTraffic, ...]) -> dict[tuple[str, str], tuple[int, ...]]:
    return {(t.client, t.upstream): tuple(getattr(t, n) for n in TRAFFIC_COUNTS) for t in taken}


def test_a_take_hands_out_what_each_pair_gained_since_the_previous():
    counter = TrafficCounter()
    shop = counter.record("shop", "acme-us")
    assert counter.record("shop", "acme-us") is shop  # one live record per pair
    shop.requests += 2
    shop.bytes_up += 100
    shop.bytes_down += 5_000
    shop.failed_upstream += 1
    crawler = counter.record("crawler", "acme-us")
    crawler.tunnels += 1
    crawler.failed_timeout += 1
    crawler.failed_connect += 2
    crawler.failed_closed += 3
    assert figures(counter.take(10)) == {
        ("shop", "acme-us"): (2, 0, 100, 5_000, 0, 0, 1, 0),
        ("crawler", "acme-us"): (0, 1, 0, 0, 2, 1, 0, 3),
    }
    assert counter.take(10) == ()  # nothing new: nothing handed out twice
    shop.bytes_down += 7  # a long tunnel goes on incrementing the record it holds
    assert figures(counter.take(10)) == {("shop", "acme-us"): (0, 0, 0, 7, 0, 0, 0, 0)}
    assert counter.record("shop", "acme-us") is shop


def test_a_take_of_at_most_n_leaves_the_rest_whole_and_hands_pairs_out_in_turn():
    counter = TrafficCounter()
    records = {f"c{i}": counter.record(f"c{i}", "u1") for i in range(5)}
    carried = dict.fromkeys(records, 0)
    reported = dict.fromkeys(records, 0)
    rng = random.Random(7)
    for _ in range(40):
        for name, record in records.items():
            n = rng.randrange(0, 3)
            record.requests += n
            carried[name] += n
        taken = counter.take(2)
        assert len(taken) <= 2
        for t in taken:
            reported[t.client] += t.requests
    while taken := counter.take(2):
        for t in taken:
            reported[t.client] += t.requests
    assert reported == carried  # nothing lost, nothing twice
    # In turn: five pairs always busy, two a take: each is handed out every third take.
    for record in records.values():
        record.requests += 1
    seen = [t.client for _ in range(3) for t in counter.take(2)]
    assert sorted(seen) == sorted(records)


def test_held_records_stay_and_released_ones_go_once_reported():
    counter = TrafficCounter()
    held = counter.record("shop", "u1")
    held.requests += 1
    released = counter.record("crawler", "u1")
    released.requests += 1
    del released  # the connection ended after counting: its figures are still handed out
    assert figures(counter.take(10)) == {
        ("shop", "u1"): (1, 0, 0, 0, 0, 0, 0, 0),
        ("crawler", "u1"): (1, 0, 0, 0, 0, 0, 0, 0),
    }
    assert counter.take(10) == ()
    assert len(counter) == 1  # the crawler's record went; the held one stays, idle or not
    for _ in range(3):
        assert counter.take(10) == ()
    held.bytes_up += 9  # hours later, on the same record
    assert figures(counter.take(10)) == {("shop", "u1"): (0, 0, 9, 0, 0, 0, 0, 0)}


def test_past_its_bound_a_pair_is_counted_under_other_for_its_upstream():
    counter = TrafficCounter(max_pairs=2, max_others=1)
    a, b = counter.record("a", "u1"), counter.record("b", "u1")
    c = counter.record("c", "u1")  # past the named bound
    assert counter.record("d", "u1") is c  # one OTHER record per upstream
    e = counter.record("e", "u2")  # the OTHER records' bound too: the one catch-all
    assert counter.record("f", "u3") is e
    assert len(counter) == 2 + 1 + 1
    for record in (a, b, c, e):
        record.requests += 1
    c.requests += 1  # d's
    e.requests += 1  # f's
    assert figures(counter.take(10)) == {
        ("a", "u1"): (1, 0, 0, 0, 0, 0, 0, 0),
        ("b", "u1"): (1, 0, 0, 0, 0, 0, 0, 0),
        (OTHER, "u1"): (2, 0, 0, 0, 0, 0, 0, 0),
        (OTHER, OTHER): (2, 0, 0, 0, 0, 0, 0, 0),
    }
    # Once released and reported, records leave and their places are free again.
    del a, c, e, record
    counter.take(10)
    assert len(counter) == 1  # b's
    counter.record("g", "u2").tunnels += 1
    assert figures(counter.take(10)) == {("g", "u2"): (0, 1, 0, 0, 0, 0, 0, 0)}


def test_a_figure_past_the_wires_bound_is_handed_out_over_several_takes():
    counter = TrafficCounter()
    record = counter.record("shop", "u1")
    record.bytes_down += MAX_COUNTER + 5
    assert counter.take(1)[0].bytes_down == MAX_COUNTER
    assert counter.take(1)[0].bytes_down == 5
    assert counter.take(1) == ()


def test_a_full_take_goes_on_the_wire():
    counter = TrafficCounter()
    held = []
    for i in range(MAX_TRAFFIC_ENTRIES + 10):
        record = counter.record(f"client-{i}", f"upstream-{i % 7}")
        record.requests += 1
        held.append(record)
    taken = counter.take(MAX_TRAFFIC_ENTRIES)
    assert len(taken) == MAX_TRAFFIC_ENTRIES
    body = RuntimeReportBody(1, 1, 1, traffic=taken)
    assert decode_report(encode_report(body)) == body
    assert len(counter.take(MAX_TRAFFIC_ENTRIES)) == 10
