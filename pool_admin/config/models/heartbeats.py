"""Heartbeats of the processes that have no other trace of being alive: Celery beat writes its
own while it ticks (pool_admin/beat.py), and ``manage.py doctor`` reads how old it is.

One row per process role and place (host and PID), overwritten in place, so two beats running
at once show as two fresh rows (the doctor fails that: every task would be sent twice). A
writer deletes its role's rows older than ``FORGET_AFTER``: the table holds the roles' recent
places only.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import models

#: A place's row is deleted by the next write of its role this long after its last beat.
FORGET_AFTER = timedelta(days=1)


class Heartbeat(models.Model):
    class Role(models.TextChoices):
        BEAT = "beat", "Celery beat"

    role = models.CharField(max_length=20, choices=Role)
    #: The time of the last beat, by the writing process's clock.
    at = models.DateTimeField()
    #: Where it was written from (host name and PID).
    where = models.CharField(max_length=200)

    class Meta:
        verbose_name = "process heartbeat"
        constraints = [
            models.UniqueConstraint(fields=["role", "where"], name="one_heartbeat_per_place")
        ]

    def __str__(self) -> str:
        return f"{self.role} at {self.at.isoformat()} ({self.where})"
