"""The doctor's checks in the order they print. A check that reads through a store whose own
check failed prints as not checked (its ``needs``): one fault, one failing line."""

from __future__ import annotations

from django.conf import settings

from activity import redis_url
from pool_admin.doctor import processes, stores
from pool_admin.doctor.findings import Check

REDIS_FIX = "start that Redis, or correct its URL (REDIS_URL, METRICS_REDIS_URL, CELERY_BROKER_URL)"


def all_checks() -> list[Check]:
    checks = [
        Check("config", stores.check_config, "run manage.py check"),
        Check("postgres", stores.check_postgres, "start PostgreSQL, or correct DATABASE_URL"),
    ]
    for role, url in stores.redis_roles():
        checks.append(Check(f"redis:{role}", stores.check_redis(role, url), REDIS_FIX))
    for role, url in stores.redis_roles():
        if redis_url.is_sentinel_url(url):
            checks.append(Check(f"sentinel:{role}", stores.check_sentinels(role, url), REDIS_FIX))
    for role, url in stores.redis_roles():
        if role in stores.LIBRARIES:
            check = stores.check_libraries(role, url)
            checks.append(Check(f"lua:{role}", check, REDIS_FIX, needs=(f"redis:{role}",)))
    pool, database = ("redis:pool",), ("postgres",)
    checks += [
        Check("clock", lambda: stores.check_clock(settings.REDIS_URL), REDIS_FIX, pool),
        Check("celery", processes.check_celery, "start the workers", ("redis:broker",)),
        Check("beat", processes.check_beat, "start beat", database),
        Check("metrics-consumer", processes.check_consumer, REDIS_FIX, ("redis:metrics",)),
        Check("gateway", processes.check_gateway, "start the workers", (*pool, *database)),
        Check("alerts", processes.check_alerts, "see Alerts in the admin", database),
    ]
    return checks
