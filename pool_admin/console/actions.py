"""What an operator may do from the console, each through the pool's (or the scheduler's)
ports, each confirmed first and recorded after (``OperatorAction``: who, when, what, on what,
and what the pool answered).

An action is looked at (``preview``: what it would do, or why it cannot) on a confirmation
page, and done (``perform``) only on that page's POST. Anything it cannot do is refused with a
clear reason and changes nothing; a refusal is not an action and leaves no audit entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse
from django.utils import timezone

from activity.errors import ActivityError, InvalidRequest
from activity.inspection import ProxyDetail
from activity.scheduler.types import RequestOutcome
from activity.types import Assignment, HealthUpdate, ProxyState
from pool_admin import alerts
from pool_admin.bootstrap import get_pool, get_scheduler
from pool_admin.config.models import Alert, Upstream
from pool_admin.console.models import OperatorAction

#: Proxies one "drain a worker" begins at most (the rest: run it again).
MAX_DRAIN_BATCH = 1_000
Kind = OperatorAction.Kind


class Refused(Exception):
    """The action cannot be done on this target; ``str(exc)`` says why (no secret in it)."""


@dataclass(frozen=True)
class Action:
    kind: OperatorAction.Kind
    #: What the confirmation page says will happen (raises Refused when it cannot).
    preview: Callable[[str], str]
    #: Does it; what the pool answered (raises Refused, nothing changed).
    perform: Callable[[str], str]
    #: Where to go afterwards.
    back: Callable[[str], str]


def _proxy_url(proxy_id: str) -> str:
    return f"{reverse('console:proxy')}?{urlencode({'id': proxy_id})}"


def _assignment(proxy_id: str) -> Assignment:
    try:
        owner = get_pool().get(proxy_id)
    except InvalidRequest:
        raise Refused("not a proxy ID") from None
    if owner is None:
        raise Refused(f"proxy {proxy_id} is not assigned to a gateway worker: nothing to drain")
    if owner.draining:
        raise Refused(f"proxy {proxy_id} is draining already (worker {owner.worker_id})")
    return owner


def _preview_drain_proxy(proxy_id: str) -> str:
    owner = _assignment(proxy_id)
    return (
        f"Begin drain of proxy {proxy_id}: worker {owner.worker_id} stops taking new "
        "connections through it and releases it once its connections end."
    )


def _drain_proxy(proxy_id: str) -> str:
    owner = _assignment(proxy_id)
    done = get_pool().begin_drain(proxy_id, owner.worker_id, owner.epoch)
    return f"draining on worker {done.worker_id} (assignment epoch {done.epoch})"


def _worker_proxies(worker_id: str) -> list[str]:
    try:
        held = get_pool().worker_assignments(worker_id, MAX_DRAIN_BATCH)
    except InvalidRequest:
        raise Refused("not a worker ID") from None
    ids = [a.proxy_id for a in held.assignments]
    if not ids:
        raise Refused(f"worker {worker_id} holds no proxy that is not draining already")
    return ids


def _preview_drain_worker(worker_id: str) -> str:
    ids = _worker_proxies(worker_id)
    return (
        f"Begin drain of every proxy worker {worker_id} holds ({len(ids)}): it takes no new "
        "connections through them and releases each once its connections end."
    )


def _drain_worker(worker_id: str) -> str:
    """Each proxy on its own: one whose lease ended or moved meanwhile (or a pool that stops
    answering midway) does not undo the drains begun, and the outcome says what was done, so
    the audit records it."""
    pool, begun, failed = get_pool(), 0, 0
    for pid in _worker_proxies(worker_id):
        try:
            owner = pool.get(pid)
            if owner is not None and not owner.draining and owner.worker_id == worker_id:
                pool.begin_drain(pid, worker_id, owner.epoch)
                begun += 1
        except ActivityError:
            failed += 1
    if not begun:
        raise Refused(f"no proxy of worker {worker_id} could be drained now ({failed} failed)")
    more = len(_worker_proxies_or_none(worker_id)) if not failed else 0
    said = f"{begun} proxies draining"
    if failed:
        said += f"; {failed} could not be (changed meanwhile, or the pool did not answer)"
    return said + (f"; {more} more remain (run it again)" if more else "")


def _worker_proxies_or_none(worker_id: str) -> list[str]:
    try:
        return _worker_proxies(worker_id)
    except Refused:
        return []


def _live_proxy(proxy_id: str) -> ProxyDetail:
    try:
        detail = get_pool().proxy_detail(proxy_id)
    except InvalidRequest:
        raise Refused("not a proxy ID") from None
    if detail is None:
        raise Refused(f"no live proxy {proxy_id}")
    if detail.summary.state in (ProxyState.REMOVED, ProxyState.EXTRACTED):
        raise Refused(f"proxy {proxy_id} is {detail.summary.state}: it is out of the pool already")
    return detail


def _preview_remove(proxy_id: str) -> str:
    detail = _live_proxy(proxy_id)
    held = f" (assigned to worker {detail.summary.worker_id})" if detail.summary.worker_id else ""
    return (
        f"Remove proxy {proxy_id} of {detail.summary.upstream_id} from the pool{held}: it is "
        "never handed out again in this lifecycle."
    )


def _remove(proxy_id: str) -> str:
    _live_proxy(proxy_id)
    result = get_pool().apply_health(
        [HealthUpdate(proxy_id, ProxyState.REMOVED, datetime.now(UTC), None, "operator")]
    )
    return "removed" if result.applied else "not removed: the pool had changed it meanwhile"


def _upstream(name: str) -> Upstream:
    upstream = Upstream.objects.select_related("account").filter(name=name).first()
    if upstream is None:
        raise Refused(f"no upstream {name[:64]}")
    if not (upstream.enabled and upstream.account.enabled):
        raise Refused(f"upstream {name} is disabled (or its account is): it is not fetched")
    return upstream


def _preview_fetch(name: str) -> str:
    upstream = _upstream(name)
    return (
        f"Fetch {name} now, ahead of its cadence (account {upstream.account.name}'s limits "
        "still apply; requests within the refill cooldown are merged)."
    )


def _fetch(name: str) -> str:
    upstream = _upstream(name)
    outcome = get_scheduler().request(
        datetime.now(UTC),
        upstream.account.name,
        name,
        timedelta(seconds=upstream.refill_cooldown_s),
    )
    if outcome is RequestOutcome.UNKNOWN:  # nothing changed: not an action
        raise Refused(
            f"upstream {name} is not scheduled yet; the next dispatch (within "
            "seconds) schedules it, then it can be requested"
        )
    if outcome is RequestOutcome.MERGED:
        return "merged with a request made within the upstream's refill cooldown"
    return "requested: fetched at the next dispatch, ahead of its cadence"


def _open_alert(alert_id: str) -> Alert:
    alert = None
    if alert_id.isdigit():
        alert = Alert.objects.select_related("upstream").filter(pk=int(alert_id)).first()
    if alert is None:
        raise Refused("no such alert")
    if alert.closed_at is not None:
        raise Refused("the alert is closed already")
    return alert


def _preview_close(alert_id: str) -> str:
    alert = _open_alert(alert_id)
    return (
        f"Close the {alert.get_kind_display()} alert of {alert.upstream.name} "
        f"({alert.failures} failures). A new failure opens a new one."
    )


def _close(alert_id: str) -> str:
    alert = _open_alert(alert_id)
    alert.closed_at = timezone.now()
    # Only while still open: two operators (or a fetch that succeeded) closing it at once
    # close it, notify and record once; the later one is told it is closed already.
    closed = Alert.objects.filter(pk=alert.pk, closed_at__isnull=True).update(
        closed_at=alert.closed_at
    )
    if not closed:
        raise Refused("the alert is closed already")
    alerts.notify(alert, "closed")
    return f"closed ({alert.upstream.name}, {alert.kind})"


ACTIONS: dict[str, Action] = {
    a.kind.value: a
    for a in (
        Action(Kind.DRAIN_PROXY, _preview_drain_proxy, _drain_proxy, _proxy_url),
        Action(
            Kind.DRAIN_WORKER,
            _preview_drain_worker,
            _drain_worker,
            lambda w: f"{reverse('console:ownership')}?{urlencode({'worker': w})}",
        ),
        Action(Kind.REMOVE_PROXY, _preview_remove, _remove, _proxy_url),
        Action(Kind.FETCH_NOW, _preview_fetch, _fetch, lambda _: reverse("console:overview")),
        Action(Kind.CLOSE_ALERT, _preview_close, _close, lambda _: reverse("console:overview")),
    )
}


def run(action: Action, target: str, user: Any) -> OperatorAction:
    """Do it and record it; Refused (nothing done, nothing recorded) when it cannot be done,
    ActivityError when the pool could not answer (nothing recorded either)."""
    outcome = action.perform(target)
    return OperatorAction.objects.create(
        user=user if user.is_authenticated else None,
        username=user.get_username()[:150],
        kind=action.kind,
        target=target[:200],
        outcome=outcome[:500],
    )


__all__ = ["ACTIONS", "Action", "ActivityError", "Refused", "run"]
