"""The console's two models: a permission holder with no table (django-rq's pattern: it puts
"Console" on the admin index and names the permissions), and the audit of operator actions.

No proxy data is stored here (invariant 3): an action names its target by ID (a proxy ID, a
worker ID, an upstream or alert), never by address or credential.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

#: The permission every console page needs (and "Console" on the admin index).
VIEW_PERMISSION = "console.view_console"


class Console(models.Model):
    """No table: the admin index's entry and the console's permissions."""

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [
            ("view_console", "Can view the live console"),
            ("operate_pool", "Can act on the pool from the live console"),
        ]
        verbose_name = "console"
        verbose_name_plural = "console"


class OperatorAction(models.Model):
    """One action an operator took from the console: who, when, what, on what, and how it
    went. Written by the console only; read-only in the admin."""

    class Kind(models.TextChoices):
        DRAIN_WORKER = "drain_worker", "Begin drain for a worker"
        DRAIN_PROXY = "drain_proxy", "Begin drain for a proxy"
        REMOVE_PROXY = "remove_proxy", "Remove a proxy"
        FETCH_NOW = "fetch_now", "Trigger a fetch now"
        CLOSE_ALERT = "close_alert", "Close an alert"

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    #: The operator's username when they acted (kept if the user is deleted later).
    username = models.CharField(max_length=150)
    kind = models.CharField(max_length=20, choices=Kind)
    target = models.CharField(max_length=200, help_text="What it acted on, by ID.")
    outcome = models.CharField(max_length=500, help_text="What the pool answered.")

    class Meta:
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.username} {self.kind} {self.target}"
