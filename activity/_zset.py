"""A sorted set with Redis ZSET ordering (score, then member), for MemoryPool.

MemoryPool mirrors RedisPool's indexes one for one, so scan budgets count the same members in
the same order in both implementations.
"""

from __future__ import annotations

from collections.abc import Iterator

from sortedcontainers import SortedList


class ZSet:
    __slots__ = ("_order", "_scores")

    def __init__(self) -> None:
        self._scores: dict[str, int] = {}
        self._order = SortedList()

    def __len__(self) -> int:
        return len(self._scores)

    def __contains__(self, member: object) -> bool:
        return member in self._scores

    def __iter__(self) -> Iterator[str]:
        return (member for _, member in self._order)

    def score(self, member: str) -> int | None:
        return self._scores.get(member)

    def add(self, member: str, score: int) -> None:
        old = self._scores.get(member)
        if old == score:
            return
        if old is not None:
            self._order.remove((old, member))
        self._scores[member] = score
        self._order.add((score, member))

    def remove(self, member: str) -> bool:
        old = self._scores.pop(member, None)
        if old is None:
            return False
        self._order.remove((old, member))
        return True

    def _first_above(self, threshold: int) -> int:
        # (t + 1,) sorts before every (t + 1, member): the first entry with score > t.
        return int(self._order.bisect_left((threshold + 1,)))

    def count_above(self, threshold: int) -> int:
        """ZCOUNT key (threshold +inf"""
        return len(self._order) - self._first_above(threshold)

    def above(self, threshold: int, limit: int) -> list[str]:
        """ZRANGEBYSCORE key (threshold +inf LIMIT 0 limit"""
        start = self._first_above(threshold)
        return [member for _, member in self._order.islice(start, start + limit)]

    def above_scored(self, threshold: int, limit: int) -> list[tuple[int, str]]:
        """ZRANGEBYSCORE key (threshold +inf WITHSCORES LIMIT 0 limit, as (score, member)"""
        start = self._first_above(threshold)
        return list(self._order.islice(start, start + limit))

    def top_above(self, threshold: int, limit: int) -> list[tuple[str, int]]:
        """ZREVRANGEBYSCORE key +inf (threshold WITHSCORES LIMIT 0 limit: the highest scores
        first, equal scores by member descending, as Redis orders a reversed range."""
        start = self._first_above(threshold)
        end = len(self._order)
        first = max(start, end - limit)
        return [(member, score) for score, member in reversed(self._order[first:end])]

    def at_most(self, threshold: int, limit: int) -> list[str]:
        """ZRANGEBYSCORE key -inf threshold LIMIT 0 limit"""
        end = min(self._first_above(threshold), limit)
        return [member for _, member in self._order.islice(0, end)]

    def first(self, limit: int) -> list[tuple[str, int]]:
        return [(member, score) for score, member in self._order.islice(0, limit)]

    def rank(self, member: str) -> int | None:
        """ZRANK key member"""
        score = self._scores.get(member)
        return None if score is None else int(self._order.index((score, member)))

    def count_below(self, threshold: int) -> int:
        """ZCOUNT key -inf (threshold"""
        return int(self._order.bisect_left((threshold,)))

    def range(self, start: int, count: int) -> list[tuple[str, int]]:
        """ZRANGE key start start+count-1 WITHSCORES"""
        return [(member, score) for score, member in self._order.islice(start, start + count)]
