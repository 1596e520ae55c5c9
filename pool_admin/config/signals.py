"""The fetch scheduler follows the configuration's deletions and renames at once: an upstream
deleted, renamed or moved to another account is forgotten under its old name and account, an
account deleted is dropped (its leases, requests and call logs). A dispatch schedules what
exists (pool_admin/fetch_tasks.py) but cannot list what the scheduler holds, so without this a
deleted upstream would be claimed, and would take its account's calls, forever.

A scheduler that cannot be reached is logged, never raised: the admin's change stands.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db.models.signals import post_delete, pre_save
from django.dispatch import receiver

from pool_admin.config.models import ProviderAccount, Upstream

logger = logging.getLogger(__name__)


def _forget(account: str, upstream: str) -> None:
    from activity.errors import ActivityError
    from pool_admin.bootstrap import get_scheduler

    try:
        get_scheduler().forget(account, upstream)
    except ActivityError as exc:
        logger.warning("scheduler: could not forget %s (%s)", upstream, exc.code)


@receiver(pre_save, sender=Upstream)
def upstream_renamed_or_moved(sender: Any, instance: Upstream, **kwargs: Any) -> None:
    if instance.pk is None:
        return
    before = Upstream.objects.filter(pk=instance.pk).values_list("name", "account__name").first()
    if before is None:
        return
    now = (instance.name, instance.account.name if instance.account_id else None)
    if before != now:
        _forget(before[1], before[0])


@receiver(post_delete, sender=Upstream)
def upstream_deleted(sender: Any, instance: Upstream, **kwargs: Any) -> None:
    account = (
        ProviderAccount.objects.filter(pk=instance.account_id)
        .values_list("name", flat=True)
        .first()
    )
    if account is not None:
        _forget(account, instance.name)


@receiver(post_delete, sender=ProviderAccount)
def account_deleted(sender: Any, instance: ProviderAccount, **kwargs: Any) -> None:
    from activity.errors import ActivityError
    from pool_admin.bootstrap import get_scheduler

    try:
        get_scheduler().drop_account(instance.name)
    except ActivityError as exc:
        logger.warning("scheduler: could not drop account %s (%s)", instance.name, exc.code)
