"""Celery beat's scheduler (``CELERY_BEAT_SCHEDULER``): django-celery-beat's database scheduler,
which also writes beat's heartbeat (``config.Heartbeat``, role ``beat``) while it ticks.

Beat sends tasks and runs none, so nothing else shows it alive: a worker answers a ping, beat
does not, and a beat that died leaves the workers idle without an error anywhere.
``manage.py doctor`` reads the heartbeat's age (``BEAT_HEARTBEAT_MAX_AGE_S``).

The heartbeat is written at most every ``BEAT_HEARTBEAT_S`` seconds, from the tick (beat ticks at
least every 2 s here: the fetch dispatch's period). A failed write is logged once per failure
spell and never stops beat: the schedule matters more than its witness.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import DatabaseError, close_old_connections
from django_celery_beat.schedulers import DatabaseScheduler

logger = logging.getLogger(__name__)


def write_heartbeat(now: datetime | None = None, where: str | None = None) -> None:
    """Record that this beat (``where``: its host and PID) is alive now: one upsert of its
    row, and its role's rows silent past ``FORGET_AFTER`` deleted."""
    from pool_admin.config.models import Heartbeat
    from pool_admin.config.models.heartbeats import FORGET_AFTER

    at = now or datetime.now(UTC)
    place = where or f"{socket.gethostname()}:{os.getpid()}"[:200]
    role = Heartbeat.Role.BEAT
    Heartbeat.objects.update_or_create(role=role, where=place, defaults={"at": at})
    Heartbeat.objects.filter(role=role, at__lt=at - FORGET_AFTER).delete()


class Scheduler(DatabaseScheduler):  # type: ignore[misc]  # an untyped base (django-celery-beat)
    _heartbeat_at = 0.0  # monotonic time of the last write; 0: none yet
    _heartbeat_failing = False

    def tick(self, *args: Any, **kwargs: Any) -> float:
        delay: float = super().tick(*args, **kwargs)
        now = time.monotonic()
        if now - self._heartbeat_at >= settings.BEAT_HEARTBEAT_S:
            self._heartbeat_at = now
            self._beat()
        # Never sleep past the next heartbeat: an idle schedule would otherwise leave it stale.
        return min(delay, float(settings.BEAT_HEARTBEAT_S))

    def _beat(self) -> None:
        try:
            close_old_connections()  # a connection the database dropped is opened again
            write_heartbeat()
        except DatabaseError as exc:
            if not self._heartbeat_failing:
                logger.warning("beat: could not write its heartbeat: %s", type(exc).__name__)
            self._heartbeat_failing = True
        else:
            if self._heartbeat_failing:
                logger.info("beat: heartbeat written again")
            self._heartbeat_failing = False
