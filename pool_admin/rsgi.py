"""RSGI entry point of the web server (``pool_admin.launcher.web_command``).

The WSGI application of pool_admin/wsgi.py, served through :class:`~pool_admin.rsgi_bridge.
WSGIBridge`: each body read on the event loop within ``WEB_BODY_TIMEOUT_S`` (else a 408 and
the connection closed) and at most ``DATA_UPLOAD_MAX_MEMORY_SIZE`` + 1 bytes, then the
application run on ``WEB_THREADS`` threads. pool_admin.wsgi:application stays a plain WSGI
application, for a server that reads bodies under a deadline itself.
"""

# First: it sets Django up, which the imports after it need.
from pool_admin.wsgi import application as wsgi_application  # isort: skip

import logging

from django.conf import settings

from activity.log_batches import LogBatches
from pool_admin.api.problems import BodyTimedOut
from pool_admin.api.request_bodies import DEFAULT_LIMIT, refusal_answer
from pool_admin.rsgi_bridge import Headers, WSGIBridge

#: Written every 0.2 s, as the call log is; at most 10,000 lines wait per worker (a worker
#: answering 50,000 requests/s, over ten times bench/api.py's figures).
access_lines = LogBatches(
    logging.getLogger("pool_admin.access"), name="access log", max_queued=10_000, interval_s=0.2
)


def refuse_slow_body(path: str) -> tuple[int, Headers, bytes]:
    """408 ``request_timeout`` (problem+json under /api/); the connection is closed after it,
    the rest of the body unread."""
    status, headers, content = refusal_answer(path, BodyTimedOut(settings.WEB_BODY_TIMEOUT_S))
    return status, [*headers, ("Connection", "close")], content


application = WSGIBridge(
    wsgi_application,
    body_timeout=settings.WEB_BODY_TIMEOUT_S,
    body_limit=settings.DATA_UPLOAD_MAX_MEMORY_SIZE or DEFAULT_LIMIT,
    threads=settings.WEB_THREADS,
    refuse_slow_body=refuse_slow_body,
    access_log=access_lines.add if settings.WEB_ACCESS_LOG else None,
)
