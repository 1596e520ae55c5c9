"""The console's pages (staff with ``console.view_console`` only: pool_admin/console/urls.py).

A page renders whole on its first load; its live part is re-read by the page itself every few
seconds (static/console/console.js, the interval the operator picks, 2 s at the least) from
the same URL with ``?part=live``, which renders only that part: one template, no second
rendering in JavaScript, and no inline script (the site's Content-Security-Policy).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from pool_admin.config.models import Upstream
from pool_admin.console.actions import ACTIONS, ActivityError, Refused, run
from pool_admin.console.history import DEFAULT_WINDOW, WINDOWS, history
from pool_admin.console.overview import overview
from pool_admin.console.ownership import ownership_page
from pool_admin.console.proxies import proxies_page, proxy_detail

#: The refresh intervals an operator may pick, seconds (0: off); Sidekiq's floor is 2 s.
REFRESH_CHOICES = (2, 5, 10, 30, 60, 0)
DEFAULT_REFRESH_S = 5


def _page(request: HttpRequest, template: str, title: str, context: dict[str, Any]) -> HttpResponse:
    if request.GET.get("part") == "live":  # admin_view marks every answer never-cache
        return TemplateResponse(request, f"console/_{template}", context)
    return TemplateResponse(
        request,
        f"console/{template}",
        {
            **admin.site.each_context(request),
            "title": title,
            "live_part": f"console/_{template}",
            "refresh_choices": REFRESH_CHOICES,
            "default_refresh_s": DEFAULT_REFRESH_S,
            **context,
        },
    )


def overview_view(request: HttpRequest) -> HttpResponse:
    data = overview()
    return _page(request, "overview.html", "Console", {"overview": data, "now": data.at})


def proxies_view(request: HttpRequest) -> HttpResponse:
    data = proxies_page(request.GET)
    response = _page(request, "proxies.html", "Proxies", {"proxies": data, "now": _now()})
    if data.filters.errors:
        response.status_code = 400  # bad input: said on the page, nothing read
    return response


def proxy_view(request: HttpRequest) -> HttpResponse:
    proxy_id = request.GET.get("id", "")
    detail, problem = proxy_detail(proxy_id)
    context = {"detail": detail, "problem": problem, "proxy_id": proxy_id, "now": _now()}
    response = _page(request, "proxy.html", f"Proxy {proxy_id[:80]}", context)
    if detail is None:
        response.status_code = 400 if problem == "not a proxy ID" else 404
    return response


def _now() -> datetime:
    return datetime.now(UTC)


def ownership_view(request: HttpRequest) -> HttpResponse:
    worker_id = request.GET.get("worker") or None
    data = ownership_page(worker_id)
    context = {"ownership": data, "worker_id": worker_id, "now": _now()}
    response = _page(request, "ownership.html", "Ownership", context)
    if data.problem:
        response.status_code = 400
    return response


def history_view(request: HttpRequest) -> HttpResponse:
    window = request.GET.get("window") or DEFAULT_WINDOW
    names = list(Upstream.objects.order_by("name").values_list("name", flat=True)[:1_000])
    upstream = request.GET.get("upstream") or None
    problem = ""
    if window not in WINDOWS:
        problem, window = f"window must be one of {', '.join(WINDOWS)}", DEFAULT_WINDOW
    if upstream is not None and upstream not in names:
        problem, upstream = "no such upstream", None
    context = {
        "data": history(window, upstream),
        "windows": WINDOWS.values(),
        "window": window,
        "upstreams": names,
        "upstream": upstream,
        "problem": problem,
        "now": _now(),
    }
    response = _page(request, "history.html", "History", context)
    if problem:
        response.status_code = 400
    return response


def action_view(request: HttpRequest, kind: str) -> HttpResponse:
    """An operator action: GET shows what it would do and asks to confirm; POST does it and
    records it. Staff with the ``console.operate_pool`` permission only."""
    action = ACTIONS.get(kind)
    if action is None:
        raise Http404("no such action")
    if not request.user.has_perm("console.operate_pool"):
        raise PermissionDenied("acting on the pool needs the console.operate_pool permission")
    asked = request.POST if request.method == "POST" else request.GET
    target = asked.get("target") or ""
    back = action.back(target)
    try:
        if request.method == "POST":
            done = run(action, target, request.user)
            messages.success(request, f"{action.kind.label}: {done.outcome}.")
            return HttpResponseRedirect(back)
        preview = action.preview(target)
    except Refused as exc:
        messages.error(request, f"{action.kind.label}: {exc}.")
        return HttpResponseRedirect(back)
    except ActivityError as exc:
        messages.error(request, f"{action.kind.label}: the pool could not answer ({exc.code}).")
        return HttpResponseRedirect(back)
    return TemplateResponse(
        request,
        "console/confirm.html",
        {
            **admin.site.each_context(request),
            "title": action.kind.label,
            "action": action,
            "target": target,
            "preview": preview,
            "back": back,
        },
    )
