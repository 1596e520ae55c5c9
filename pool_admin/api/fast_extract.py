"""The extract endpoint as its own small WSGI application, mounted ahead of Django's.

The extract is the API's load. Through Django's handler (request signals, the middleware
chain, URL resolution, DRF's view) a request cost about 0.9 ms of CPU on top of the extract's
own ~0.5 ms (docs/PERFORMANCE.md). The web server's application (pool_admin/wsgi.py) is
therefore :class:`FastExtract` around Django's: it answers the ordinary extract itself and
hands every other request to Django untouched.

It takes (:meth:`FastExtract.answer`; anything else goes to Django before anything is read):

* ``POST /api/v1/extract`` with no query string, a JSON content type, no ``Accept`` or one of
  exactly ``*/*`` or ``application/json``, and a body of 1 byte to :data:`MAX_BODY` (and
  within ``DATA_UPLOAD_MAX_MEMORY_SIZE``);
* a host that Django's own ``validate_host`` admits under ``settings.ALLOWED_HOSTS``, found as
  ``HttpRequest.get_host`` finds it, and nothing Django's Security and Common middleware would
  redirect or refuse (SSL redirect, ``PREPEND_WWW``, ``DISALLOWED_USER_AGENTS``): those are
  Django's to answer;
* ``Authorization: Bearer`` with a key verified less than ``auth.CACHE_TTL`` ago (an unknown
  key is verified, and cached, by Django's path, which also manages the database connection);
* nothing of ``ExtractView``'s configuration but what this module does too
  (:data:`VIEW_AS_DONE_HERE`): a view given another permission, throttle or renderer is a
  system check error (pool_admin/checks.py, ``pool_admin.E003``) and this application refuses
  to be built, so the web server does not start, rather than quietly leaving every extract to
  Django's slower path.

Once it has the key, the request is this application's: the body is read and parsed as DRF's
parser does it (parsers.parse_json), the extract is ``views.run_extract``, the function
``ExtractView.post`` calls, and every answer, errors included, is made here from the API's one
error table (problems.py). Headers are computed once, when the application is built: the view's
own (``Allow``) and those Django's ``SecurityMiddleware`` gives under the same settings, secure
or not. So the admin's middleware can change freely; an answer that would then differ from
Django's is caught by tests/pool_admin/api/test_fast_extract.py, the contract between the two,
and every API test runs through both (the ``api`` fixture).
"""

from __future__ import annotations

import http.client
import uuid
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.handlers.wsgi import get_path_info, get_script_name
from django.http import HttpRequest, HttpResponse, UnreadablePostError
from django.http.request import split_domain_port, validate_host
from django.middleware.security import SecurityMiddleware
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import JSONRenderer

from pool_admin.api.auth import ApiKeyAuthentication, IsApiClient, bearer_key, cached_principal
from pool_admin.api.extracting import count_refused_call
from pool_admin.api.parsers import JSONParser, parse_json
from pool_admin.api.problems import PROBLEM_JSON, answer_exception, render_problem
from pool_admin.api.views import ExtractView, run_extract

#: Where ExtractView is mounted (pool_admin/urls.py and pool_admin/api/urls.py).
EXTRACT_PATH = "/api/v1/extract"
_CONTENT_TYPES = frozenset({"application/json", "application/json; charset=utf-8"})
_ACCEPT = frozenset({"*/*", "application/json"})
#: Largest body taken here (an extract body is well under 1 KiB); larger ones go to Django.
MAX_BODY = 64 * 1024
#: What ExtractView does around its ``post`` that this application does itself, attribute by
#: attribute. A view configured otherwise answers every request itself.
VIEW_AS_DONE_HERE: dict[str, Any] = {
    "authentication_classes": [ApiKeyAuthentication],
    "permission_classes": [IsApiClient],
    "throttle_classes": [],
    "renderer_classes": [JSONRenderer],
    "parser_classes": [JSONParser],
    "content_negotiation_class": DefaultContentNegotiation,
    "versioning_class": None,
    "charges_request_unit": False,
}

_render_json = JSONRenderer().render
StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
Headers = list[tuple[str, str]]


class Answer(NamedTuple):
    """What the web server sends: status line, headers in order, body."""

    status: str
    headers: Headers
    content: bytes


def view_differences() -> list[str]:
    """How ExtractView differs from what this application does around its ``post``, one line
    per attribute; empty when it does not."""
    return [
        f"ExtractView.{name} is {getattr(ExtractView, name)!r}, not {value!r}"
        for name, value in VIEW_AS_DONE_HERE.items()
        if getattr(ExtractView, name) != value
    ]


def view_is_as_done_here() -> bool:
    return not view_differences()


class _Scheme(HttpRequest):
    """A request that is only secure or not: what SecurityMiddleware's headers depend on."""

    def __init__(self, scheme: str) -> None:
        super().__init__()
        self._scheme = scheme

    def _get_scheme(self) -> str:
        return self._scheme


def security_headers(secure: bool) -> Headers:
    """The headers Django's SecurityMiddleware adds to an answer under the current settings."""
    response = SecurityMiddleware(lambda request: HttpResponse()).process_response(
        _Scheme("https" if secure else "http"), HttpResponse()
    )
    return [(k, v) for k, v in response.items() if k != "Content-Type"]


def _is_secure(environ: dict[str, Any]) -> bool:
    """``HttpRequest.is_secure()`` of this environ."""
    if settings.SECURE_PROXY_SSL_HEADER:
        header, secure_value = settings.SECURE_PROXY_SSL_HEADER
        value = environ.get(header)
        if value is not None:
            return bool(value.split(",", 1)[0].strip() == secure_value)
    return bool(environ.get("wsgi.url_scheme") == "https")


def _raw_host(environ: dict[str, Any], secure: bool) -> str:
    """The host ``HttpRequest.get_host()`` checks, found as it finds it."""
    if settings.USE_X_FORWARDED_HOST and "HTTP_X_FORWARDED_HOST" in environ:
        return str(environ["HTTP_X_FORWARDED_HOST"])
    if "HTTP_HOST" in environ:
        return str(environ["HTTP_HOST"])
    host = str(environ["SERVER_NAME"])
    if settings.USE_X_FORWARDED_PORT and "HTTP_X_FORWARDED_PORT" in environ:
        port = str(environ["HTTP_X_FORWARDED_PORT"])
    else:
        port = str(environ["SERVER_PORT"])
    return host if port == ("443" if secure else "80") else f"{host}:{port}"


def _django_would_answer_itself(environ: dict[str, Any], secure: bool) -> bool:
    """Whether Django's Security or Common middleware would redirect or refuse this request
    (an SSL redirect, a host outside ALLOWED_HOSTS, a denied user agent, PREPEND_WWW)."""
    if settings.SECURE_SSL_REDIRECT and not secure:
        return True
    agent = environ.get("HTTP_USER_AGENT")
    if agent is not None and any(p.search(agent) for p in settings.DISALLOWED_USER_AGENTS):
        return True
    host = _raw_host(environ, secure)
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]  # as get_host() widens them
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, allowed):
        return True
    return bool(settings.PREPEND_WWW and not host.startswith("www."))


def _ordinary(environ: dict[str, Any]) -> int:
    """The body's length when this is a request taken here, else 0."""
    if (
        environ.get("PATH_INFO") != EXTRACT_PATH
        or environ.get("REQUEST_METHOD") != "POST"
        or environ.get("QUERY_STRING")
        or environ.get("CONTENT_TYPE", "").lower() not in _CONTENT_TYPES
        or environ.get("HTTP_ACCEPT", "*/*") not in _ACCEPT  # an empty Accept is DRF's 406
    ):
        return 0
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0
    if not 0 < length <= MAX_BODY:
        return 0
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE  # Django's 413 above it
    return 0 if limit is not None and length > limit else length


def _read_body(environ: dict[str, Any], length: int) -> bytes:
    """The body, read as Django reads it (what arrived of ``length`` bytes)."""
    stream = environ["wsgi.input"]
    chunks = []
    left = length
    try:
        while left > 0:
            chunk = stream.read(left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:  # the client went away mid-body
        raise UnreadablePostError(*exc.args) from exc
    return b"".join(chunks)


def _path(environ: dict[str, Any]) -> str:
    """``request.path`` as Django's WSGIRequest makes it (the problem's ``instance``)."""
    path_info = get_path_info(environ) or "/"
    return "{}/{}".format(get_script_name(environ).rstrip("/"), path_info.replace("/", "", 1))


class FastExtract:
    """A WSGI application: :meth:`answer` for the ordinary extract, ``app`` for the rest.

    Built once settings are loaded; its headers come from the settings of that moment, as the
    middleware Django builds at start reads them.
    """

    def __init__(self, app: WSGIApp | None) -> None:
        differences = view_differences()
        if differences:  # the same as system check pool_admin.E003, for a server not checked
            raise ImproperlyConfigured(
                "The extract's own application would answer unlike ExtractView: "
                + "; ".join(differences)
            )
        self.app = app
        self._view_headers = list(ExtractView().default_response_headers.items())
        self._security = {secure: security_headers(secure) for secure in (False, True)}

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        answered = self.answer(environ)
        if answered is None:
            assert self.app is not None, "FastExtract without an application behind it"
            return self.app(environ, start_response)
        start_response(answered.status, answered.headers)
        return [answered.content]

    def answer(self, environ: dict[str, Any]) -> Answer | None:
        """The answer to this request, made here; None when Django must make it (then nothing
        of the request was read)."""
        length = _ordinary(environ)
        if not length:
            return None
        secure = _is_secure(environ)
        if _django_would_answer_itself(environ, secure):
            return None
        header = environ.get("HTTP_AUTHORIZATION", "").encode("iso-8859-1")
        try:
            plaintext = bearer_key(header)  # as ApiKeyAuthentication reads it
        except AuthenticationFailed:  # Django's path answers it (401)
            return None
        principal = None if plaintext is None else cached_principal(plaintext)
        if principal is None:
            return None
        # From here on the request is this application's, and so is every answer to it.
        request_id = uuid.uuid4().hex
        try:
            try:
                body = parse_json(_read_body(environ, length))
            except Exception as exc:  # the call counts, as in ExtractView.post; a 429 first
                count_refused_call(principal, exc, request_id)
                raise
            key = environ.get("HTTP_IDEMPOTENCY_KEY")
            content = _render_json(run_extract(principal, body, key, request_id))
        except Exception as exc:
            return self._problem(environ, exc, request_id, secure)
        headers = [
            ("Content-Type", JSONRenderer.media_type),
            ("X-Request-ID", request_id),
            *self._view_headers,
            ("Content-Length", str(len(content))),
            *self._security[secure],
        ]
        return Answer("200 OK", headers, content)

    def _problem(
        self, environ: dict[str, Any], exc: Exception, request_id: str, secure: bool
    ) -> Answer:
        """The error answer, as DRF's exception handler and finalize_response make it."""
        problem = answer_exception(exc)
        content = render_problem(problem, _path(environ), request_id)
        headers = [
            ("Content-Type", PROBLEM_JSON),
            *problem.headers.items(),
            *self._view_headers,
            ("Content-Length", str(len(content))),
            *self._security[secure],
        ]
        status = f"{problem.status} {http.client.responses[problem.status]}"
        return Answer(status, headers, content)
