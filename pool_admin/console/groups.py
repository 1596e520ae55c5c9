"""The ownership page's configured side: worker groups and gateway workers from PostgreSQL, set
beside the live sessions the pool lists, so an operator sees which configured worker has no
session, which session belongs to no configured worker, and what each group's live workers
hold against its target.

At most four queries whatever the fleet's size, each bounded: the groups with their worker
counts (one grouped query, ``MAX_GROUPS``), the configured workers by group and name
(``MAX_WORKERS``), the configuration of the live sessions' workers (the live list's own
bound), and the enabled workers without a live session (``MAX_IDLE``); the last two only when
the pool was read (the third only when a session is live). Those two are asked apart from the
list, not derived from it, so they hold past its bound.

What a group's live workers hold is counted in proxies (``WorkerStatus``'s held set): their
capacity in connections would take one pool read per worker.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count, Q

from activity.inspection import LiveWorkers
from pool_admin.config.models import GatewayWorker, WorkerGroup

#: Groups, configured workers listed in them, and enabled workers without a live session, one
#: page shows at most.
MAX_GROUPS = 200
MAX_WORKERS = 200
MAX_IDLE = 200


@dataclass(frozen=True)
class Configured:
    """A configured gateway worker: its group, whether it may authenticate, and whether it has
    a live session (None: the pool could not be read)."""

    name: str
    group: str
    enabled: bool
    live: bool | None = None


@dataclass
class GroupLine:
    name: str
    #: Connections the ownership manager keeps assigned to the group.
    target_capacity: int
    workers: int
    enabled_workers: int
    #: Its workers the page lists (all of them unless the fleet's list is partial).
    members: list[Configured] = field(default_factory=list)
    #: Of its workers, those with a live session (None: the pool could not be read).
    live: int | None = None
    #: Proxies its live workers hold, not draining, and those they drain (None: unknown).
    held: int | None = None
    draining: int | None = None

    @property
    def disabled_workers(self) -> int:
        return self.workers - self.enabled_workers


@dataclass
class Fleet:
    groups: list[GroupLine] = field(default_factory=list)
    #: More groups are configured than one page shows.
    groups_truncated: bool = False
    #: More workers are configured than the groups list by name.
    workers_truncated: bool = False
    #: Each live session's worker as configured (absent: no such worker is configured).
    configured: dict[str, Configured] = field(default_factory=dict)
    #: Configured, enabled workers with no live session, by name (None: the pool could not
    #: be read, so no one can say).
    idle: list[Configured] | None = None
    idle_truncated: bool = False
    #: The live list was partial: a worker listed without a session may have one past it,
    #: and the groups' live figures count only the sessions listed.
    live_partial: bool = False


def fleet(live: LiveWorkers | None) -> Fleet:
    """The configured groups and workers beside ``live`` (None: the pool was not read)."""
    rows = list(
        WorkerGroup.objects.annotate(
            n=Count("workers"), enabled_n=Count("workers", filter=Q(workers__enabled=True))
        )
        .order_by("name")
        .values_list("name", "target_capacity", "n", "enabled_n")[: MAX_GROUPS + 1]
    )
    result = Fleet(groups_truncated=len(rows) > MAX_GROUPS)
    groups = {r[0]: GroupLine(*r) for r in rows[:MAX_GROUPS]}
    result.groups = list(groups.values())
    names = [w.session.worker_id for w in live.workers] if live is not None else []
    listed = list(
        GatewayWorker.objects.order_by("group__name", "name").values_list(
            "name", "group__name", "enabled"
        )[: MAX_WORKERS + 1]
    )
    result.workers_truncated = len(listed) > MAX_WORKERS
    live_names = set(names)
    for name, group, enabled in listed[:MAX_WORKERS]:
        if group in groups:
            on = None if live is None else name in live_names
            groups[group].members.append(Configured(name, group, enabled, on))
    if live is None:
        return result
    result.live_partial = not live.complete
    _count_live(result, groups, live, names)
    idle = list(
        GatewayWorker.objects.filter(enabled=True)
        .exclude(name__in=names)
        .order_by("name")
        .values_list("name", "group__name")[: MAX_IDLE + 1]
    )
    result.idle = [Configured(name, group, True, False) for name, group in idle[:MAX_IDLE]]
    result.idle_truncated = len(idle) > MAX_IDLE
    return result


def _count_live(
    result: Fleet, groups: dict[str, GroupLine], live: LiveWorkers, names: list[str]
) -> None:
    """Each live session's configuration, and per group its live workers and their holdings."""
    for line in groups.values():
        line.live, line.held, line.draining = 0, 0, 0
    if names:
        result.configured = {
            name: Configured(name, group, enabled, True)
            for name, group, enabled in GatewayWorker.objects.filter(name__in=names).values_list(
                "name", "group__name", "enabled"
            )
        }
    for status in live.workers:
        known = result.configured.get(status.session.worker_id)
        group = groups.get(known.group) if known is not None else None
        if group is None:  # not configured, or its group is past the page
            continue
        group.live = (group.live or 0) + 1
        group.held = (group.held or 0) + status.assigned
        group.draining = (group.draining or 0) + status.draining
