"""``POST /api/v1/extract`` answered ahead of Django's request handler, for the ordinary request.

The extract is the API's load. Through Django's handler (request signals, the middleware
chain, URL resolution, DRF's view) a request cost about 0.9 ms of CPU on top of the extract's
own ~0.5 ms on this project's machines (docs/PERFORMANCE.md). The web server's WSGI
application (pool_admin/wsgi.py) is therefore :class:`DirectExtract` around Django's: it answers
the ordinary extract itself and hands every other request to Django unchanged.

What it takes (:func:`answer`; anything else goes to Django before anything is done):

* ``POST /api/v1/extract`` with no query string, a JSON content type, no ``Accept`` or one of
  exactly ``*/*`` or ``application/json``, and a body of 1 byte to 64 KiB that is strict JSON;
* a request that the project's middleware lets through: the same ``SecurityMiddleware`` and
  ``CommonMiddleware`` instances' ``process_request`` run here (host check, SSL redirect,
  user-agent rules); a redirect or an error from them is Django's to give;
* ``Authorization: Bearer`` with a key verified less than ``auth.CACHE_TTL`` ago (an unknown
  key is verified, and cached, by Django's path), which ``ExtractView``'s permissions admit.

What it does is ``views.run_extract``, the function ``ExtractView.post`` calls. The answer is
built as Django would build it: JSONRenderer's bytes, and headers from an ``HttpResponse``, the
view's ``finalize_response`` (``Allow``, ``Vary``) and the middleware's ``process_response`` in
Django's order, built once per process and kind of request and then reused with the request ID
and length filled in (about 40% of this module's own CPU per request otherwise). An error
raised by the extract is not rendered here: the request goes on to Django with the error
attached (``views.HANDED_OVER``) and ``ExtractView`` answers it through
DRF's exception handler, so every error answer is that handler's own.

The path relies on the project's settings as they are: exactly the middleware in
``KNOWN_MIDDLEWARE``; ExtractView mounted at ``EXTRACT_PATH`` with API-key authentication, no
throttle, and DRF's JSON renderer, the API's JSON parser and default negotiation. With anything
else configured it stays off (logged once) and Django serves every request.
tests/pool_admin/api run each API test through both this entry and Django's handler.
"""

from __future__ import annotations

import functools
import io
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from django.conf import settings
from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpResponse
from django.middleware.common import CommonMiddleware
from django.middleware.security import SecurityMiddleware
from django.urls import resolve
from rest_framework.authentication import get_authorization_header
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.utils import json as drf_json

from pool_admin.api.auth import ApiKeyAuthentication, bearer_key, cached_principal
from pool_admin.api.parsers import JSONParser
from pool_admin.api.views import HANDED_OVER, ExtractView, run_extract

logger = logging.getLogger(__name__)

#: Where ExtractView is mounted (pool_admin/urls.py and pool_admin/api/urls.py).
EXTRACT_PATH = "/api/v1/extract"
#: settings.MIDDLEWARE this module reproduces: the two whose hooks it runs, and two that do
#: nothing under /api/v1/ (WhiteNoise serves only its static prefix; SiteOnlyMiddleware skips
#: the API).
KNOWN_MIDDLEWARE = (
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.middleware.common.CommonMiddleware",
    "pool_admin.api.middleware.SiteOnlyMiddleware",
)
_CONTENT_TYPES = frozenset({"application/json", "application/json; charset=utf-8"})
_ACCEPT = frozenset({"*/*", "application/json"})
#: Largest body taken here (an extract body is well under 1 KiB).
MAX_BODY = 64 * 1024

_render_json = JSONRenderer().render
StartResponse = Callable[..., Any]


def _never_called(request: Any) -> Any:  # the middleware's get_response; only hooks are used
    raise AssertionError("the direct path calls middleware hooks only")


class _Hooks:
    """The middleware instances whose hooks run here, built once settings are loaded, and the
    answer's headers as they built them (see :func:`_headers`)."""

    def __init__(self) -> None:
        self.security = SecurityMiddleware(_never_called)
        self.common = CommonMiddleware(_never_called)
        #: By ``request.is_secure()``: the headers of the first answer, None where they vary.
        self.headers: dict[bool, list[tuple[str, str | None]]] = {}


class Answer(NamedTuple):
    """What the web server sends: status line, headers in order, body."""

    status: str
    headers: list[tuple[str, str]]
    content: bytes


#: The only headers of a 200 answer that differ between requests (by ``is_secure()``).
_VARYING = frozenset({"X-Request-ID", "Content-Length"})


@functools.cache
def _setup() -> _Hooks | None:
    """The hooks, or None when the settings are not the ones this path reproduces (then it is
    off, logged once). Checked once per process; ``_setup.cache_clear()`` checks again."""
    reasons = []
    if tuple(settings.MIDDLEWARE) != KNOWN_MIDDLEWARE:
        reasons.append("settings.MIDDLEWARE differs from KNOWN_MIDDLEWARE")
    if list(ExtractView.authentication_classes) != [ApiKeyAuthentication]:
        reasons.append("ExtractView authenticates otherwise than by API key")
    if ExtractView.throttle_classes:
        reasons.append("ExtractView has throttles")
    if (
        list(ExtractView.renderer_classes) != [JSONRenderer]
        or list(ExtractView.parser_classes) != [JSONParser]
        or ExtractView.content_negotiation_class is not DefaultContentNegotiation
        or ExtractView.versioning_class is not None
    ):
        reasons.append("ExtractView renders, parses or negotiates otherwise")
    if getattr(resolve(EXTRACT_PATH).func, "view_class", None) is not ExtractView:
        reasons.append(f"{EXTRACT_PATH} is not ExtractView")
    if reasons:
        logger.warning("direct extract path off: %s", "; ".join(reasons))
        return None
    return _Hooks()


def enabled() -> bool:
    """Whether the settings are the ones this path reproduces."""
    return _setup() is not None


def _content_length(environ: dict[str, Any]) -> int:
    try:
        return int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def _ordinary(environ: dict[str, Any]) -> bool:
    return (
        environ.get("PATH_INFO") == EXTRACT_PATH
        and environ.get("REQUEST_METHOD") == "POST"
        and not environ.get("QUERY_STRING")
        and environ.get("CONTENT_TYPE", "").lower() in _CONTENT_TYPES
        and environ.get("HTTP_ACCEPT", "*/*") in _ACCEPT  # an empty Accept is DRF's 406
        and 0 < _content_length(environ) <= MAX_BODY
    )


def answer(environ: dict[str, Any]) -> Answer | None:
    """Django's answer to this extract, made here; None when Django's handler must make it.

    When None is returned after the body was read, ``environ["wsgi.input"]`` holds the body
    again for Django to read.
    """
    hooks = _setup() if _ordinary(environ) else None
    if hooks is None:
        return None
    # A copy: WSGIRequest writes decoded paths back into its environ, which Django would decode
    # again if the request is left to it.
    request = WSGIRequest(environ.copy())
    try:
        if (
            hooks.security.process_request(request) is not None
            or hooks.common.process_request(request) is not None
        ):
            return None  # a redirect: Django's to give
        plaintext = bearer_key(get_authorization_header(request))  # as ApiKeyAuthentication
    except Exception:  # DisallowedHost, a malformed Authorization...: Django's path answers
        return None
    principal = None if plaintext is None else cached_principal(plaintext)
    if principal is None:
        return None
    request.user = principal  # type: ignore[assignment]  # as DRF's authentication does
    view = ExtractView()
    view.args, view.kwargs = (), {}
    # The view's permissions hold here too (a denial, or a permission that raises, is
    # answered by DRF's path).
    try:
        if not all(p.has_permission(request, view) for p in view.get_permissions()):
            return None
    except Exception:
        return None
    try:
        raw = request.body
    except Exception as exc:  # a client gone mid-body: answered as DRF answers it
        environ[HANDED_OVER] = (exc, principal, None)
        return None
    try:
        body = drf_json.loads(raw.decode("utf-8"))  # DRF's strict JSON: no NaN
    except (UnicodeError, ValueError, RecursionError):
        environ["wsgi.input"] = io.BytesIO(raw)
        return None
    request_id = uuid.uuid4().hex
    try:
        body_out = run_extract(request, principal, body, request_id)
    except Exception as exc:
        environ[HANDED_OVER] = (exc, principal, request_id)
        environ["wsgi.input"] = io.BytesIO(raw)
        return None
    content = _render_json(body_out)
    return Answer("200 OK", _headers(hooks, request, view, content, request_id), content)


def _headers(
    hooks: _Hooks, request: WSGIRequest, view: ExtractView, content: bytes, request_id: str
) -> list[tuple[str, str]]:
    """The answer's headers as Django builds them: the first time (per ``is_secure()``, which
    decides HSTS) by building the response as Django would; then the same list, with the two
    headers that differ between requests filled in. Nothing else they hold depends on the
    request: they come from settings (read by the middleware once, at start) and the view."""
    secure = request.is_secure()
    template = hooks.headers.get(secure)
    if template is not None:
        varying = {"X-Request-ID": request_id, "Content-Length": str(len(content))}
        return [(name, varying[name] if value is None else value) for name, value in template]
    # What ExtractView.post's Response becomes for the one media type the view offers.
    response = HttpResponse(content, content_type=JSONRenderer.media_type)
    response["X-Request-ID"] = request_id  # after Content-Type, in DRF's order
    view.headers = view.default_response_headers
    response = view.finalize_response(request, response)  # type: ignore[arg-type]
    # settings.MIDDLEWARE's process_response, innermost first, as Django runs them.
    response = hooks.common.process_response(request, response)
    response = hooks.security.process_response(request, response)
    assert response.status_code == 200 and not response.cookies
    headers = list(response.items())
    hooks.headers[secure] = [(k, None if k in _VARYING else v) for k, v in headers]
    return headers


class DirectExtract:
    """A WSGI application: :func:`answer` for the ordinary extract, ``app`` for the rest."""

    def __init__(self, app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == EXTRACT_PATH:
            answered = answer(environ)
            if answered is not None:
                start_response(answered.status, answered.headers)
                return [answered.content]
        return self.app(environ, start_response)
