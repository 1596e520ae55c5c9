"""Failure alerts of the fetches (issue 12): what ``run_fetch`` records, and the notifier.

A failure of an upstream and kind adds to its unclosed alert row (created at the first); at
the kind's threshold of consecutive failures the alert opens and is notified; the first
success closes an open alert (notified) or drops a pending one. One unclosed row per upstream
and kind (a partial unique index), so concurrent fetches cannot open two.

The notifier (``ALERT_NOTIFIER``): ``log`` (a warning, always), ``email`` (to
``ALERT_EMAIL_TO`` through Django's mail settings, ``EMAIL_TIMEOUT`` 10 s) or ``webhook`` (a
JSON POST to ``ALERT_WEBHOOK_URL``, 5 s per step, its reply's body not read). Closed alerts are
deleted after ``ALERT_RETENTION_DAYS`` (``prune_closed``, with the quality aggregates). A
notifier that fails is logged, never raised: an alert must not stop a fetch.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import httpx
from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone

from pool_admin.config.models import Alert, Upstream

logger = logging.getLogger(__name__)

#: Consecutive failures that open an alert of each kind.
THRESHOLDS = {
    Alert.Kind.FETCH_FAILING: 3,
    Alert.Kind.VENDOR_REFUSES: 1,
    Alert.Kind.CHECKS_FAILING: 3,
    Alert.Kind.LOW_INVENTORY: 5,
    Alert.Kind.NOTHING_TAKEN: 3,
}


def record(upstream: Upstream, kind: Alert.Kind, failed: bool, detail: str = "") -> Alert | None:
    """One fetch's outcome for ``kind``; the alert row as it is now (None: none unclosed)."""
    now = timezone.now()
    for _attempt in range(2):  # a concurrent first failure made the row: read it again
        try:
            with transaction.atomic():
                alert = (
                    Alert.objects.select_for_update()
                    .filter(upstream=upstream, kind=kind, closed_at__isnull=True)
                    .first()
                )
                if not failed:
                    return _succeeded(alert, now)
                if alert is None:
                    alert = Alert(upstream=upstream, kind=kind, first_failed_at=now)
                alert.failures += 1
                alert.last_failed_at = now
                alert.detail = detail[:500]
                opening = alert.opened_at is None and alert.failures >= THRESHOLDS[kind]
                if opening:
                    alert.opened_at = now
                alert.save()
        except IntegrityError:
            continue
        if opening:
            notify(alert, "opened")
        return alert
    return None


def _succeeded(alert: Alert | None, now: datetime) -> Alert | None:
    if alert is None:
        return None
    if alert.opened_at is None:
        alert.delete()  # failures that never reached the threshold: forgotten
        return None
    alert.closed_at = now
    alert.save(update_fields=["closed_at"])
    transaction.on_commit(lambda: notify(alert, "closed"))
    return alert


def prune_closed(older_than: timedelta, batch: int = 1_000) -> int:
    """Delete up to ``batch`` alerts closed before ``older_than`` ago; how many."""
    before = timezone.now() - older_than
    ids = list(Alert.objects.filter(closed_at__lt=before).values_list("pk", flat=True)[:batch])
    return Alert.objects.filter(pk__in=ids).delete()[0] if ids else 0


def notify(alert: Alert, event: str) -> None:
    text = (
        f"alert {event}: upstream {alert.upstream.name}: {alert.get_kind_display()} "
        f"({alert.failures} failures since {alert.first_failed_at:%Y-%m-%d %H:%M:%S} UTC)"
        + (f": {alert.detail}" if alert.detail else "")
    )
    logger.warning("%s", text)
    notifier = settings.ALERT_NOTIFIER
    try:
        if notifier == "email" and settings.ALERT_EMAIL_TO:
            send_mail(f"[proxy pool] {text[:120]}", text, None, settings.ALERT_EMAIL_TO)
        elif notifier == "webhook" and settings.ALERT_WEBHOOK_URL:
            body = {
                "event": event,
                "upstream": alert.upstream.name,
                "kind": alert.kind,
                "failures": alert.failures,
                "detail": alert.detail,
                "text": text,
            }
            # 5 s per step (connect, send, first byte); the reply's body is never read.
            with httpx.stream("POST", settings.ALERT_WEBHOOK_URL, json=body, timeout=5) as reply:
                reply.raise_for_status()
    except Exception as exc:
        logger.error("alert notifier %s failed: %s", notifier, type(exc).__name__)
