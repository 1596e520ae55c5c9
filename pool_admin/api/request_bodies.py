"""A request body sent with ``Transfer-Encoding: chunked``, read (bounded) into a body with a
``Content-Length``: the one framing Django and fast_extract.py read.

The web server (granian) takes the chunks apart and passes the body as ``wsgi.input`` with no
``CONTENT_LENGTH``, which Django reads as an empty body: a valid extract sent chunked was a 400
"count is required". :class:`ChunkedBodies`, outermost in the web server's application
(pool_admin/wsgi.py), reads such a body first, up to ``DATA_UPLOAD_MAX_MEMORY_SIZE``:

* a body within it goes on with its length, as if it had been sent with one;
* a longer one goes on marked one byte over the limit, holding what was read, so Django refuses
  it as any body over the limit (413 ``payload_too_large`` under /api/, request unit taken),
  and nothing is read past the limit; without a limit in the settings it is refused here (413);
* any other transfer coding (``gzip, chunked``...), which the web server passes on undecoded,
  is refused here: 411 ``length_required``, never a misread body.

Refusals under /api/ are problem+json (problems.py); elsewhere plain text.
"""

from __future__ import annotations

import http.client
import io
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig

from pool_admin.api.error_views import API_PATHS
from pool_admin.api.problems import PROBLEM_JSON, LengthRequired, problem_for, render_problem

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
#: Bound when the settings set none (Django's default DATA_UPLOAD_MAX_MEMORY_SIZE).
DEFAULT_LIMIT = 2_621_440
_READ_SIZE = 64 * 1024


class _Unreadable(io.RawIOBase):
    """The body of a client gone mid-body: reading it fails as reading the socket did."""

    def __init__(self, error: OSError) -> None:
        self.error = error

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        raise self.error


def _read(stream: Any, most: int) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got < most:
        chunk = stream.read(min(_READ_SIZE, most - got))
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


class ChunkedBodies:
    """WSGI: a chunked body made a body with a length before ``app`` sees the request."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        coding = environ.get("HTTP_TRANSFER_ENCODING")
        if coding is not None:
            refusal = self._with_length(environ, coding)
            if refusal is not None:
                return self._refuse(environ, start_response, refusal)
        return self.app(environ, start_response)

    @staticmethod
    def _with_length(environ: dict[str, Any], coding: str) -> Exception | None:
        """Give ``environ`` the body with its length, or say why it is refused."""
        if coding.strip().lower() != "chunked":
            return LengthRequired()
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        try:
            body = _read(environ["wsgi.input"], (limit or DEFAULT_LIMIT) + 1)
        except OSError as exc:
            environ["wsgi.input"], environ["CONTENT_LENGTH"] = _Unreadable(exc), "1"
            return None
        if limit is None and len(body) > DEFAULT_LIMIT:
            return RequestDataTooBig("Request body exceeded the chunked body bound.")
        # Over the limit: limit + 1, which Django refuses before reading anything.
        environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(body), str(len(body))
        return None

    @staticmethod
    def _refuse(
        environ: dict[str, Any], start_response: StartResponse, refusal: Exception
    ) -> Iterable[bytes]:
        status, headers, content = refusal_answer(environ.get("PATH_INFO", ""), refusal)
        start_response(f"{status} {http.client.responses[status]}", headers)
        return [content]


def refusal_answer(path: str, refusal: Exception) -> tuple[int, list[tuple[str, str]], bytes]:
    """The web tier's answer to a request it refuses before the application sees it: status,
    headers, body; problem+json under /api/ (problems.py's table), plain text elsewhere."""
    answer = problem_for(refusal)
    if path.startswith(API_PATHS):
        content, content_type = render_problem(answer, path, None), PROBLEM_JSON
    else:
        content, content_type = answer.detail.encode(), "text/plain; charset=utf-8"
    headers = [
        ("Content-Type", content_type),
        ("Content-Length", str(len(content))),
    ]
    return answer.status, headers, content
