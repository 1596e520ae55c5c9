"""Heartbeats of the processes that have no other trace of being alive: Celery beat writes its
own while it ticks (pool_admin/beat.py), and ``manage.py doctor`` reads how old it is.

One row per process role, overwritten in place: the table never grows past its roles.
"""

from __future__ import annotations

from django.db import models


class Heartbeat(models.Model):
    class Role(models.TextChoices):
        BEAT = "beat", "Celery beat"

    role = models.CharField(max_length=20, choices=Role, unique=True)
    #: The time of the last beat, by the writing process's clock.
    at = models.DateTimeField()
    #: Where it was written from (host name and PID), for the operator who has two.
    where = models.CharField(max_length=200, blank=True)

    class Meta:
        verbose_name = "process heartbeat"

    def __str__(self) -> str:
        return f"{self.role} at {self.at.isoformat()}"
