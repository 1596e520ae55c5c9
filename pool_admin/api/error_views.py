"""Django's error views (``handler400``/``403``/``404``/``500`` of pool_admin/urls.py): under
``/api/`` an error is problem+json like every other answer of the API (a path the API does not
have, a Host outside ALLOWED_HOSTS, an error outside DRF's views), from the API's one error
table (problems.py); elsewhere Django's own pages. With DEBUG on, Django shows its technical
pages instead of these, as for any view.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, resolve
from django.views import defaults

from pool_admin.api.problems import PROBLEM_JSON, ProblemAnswer, problem_for, render_problem

#: Where every error answer is problem+json: the client API, its schema and its docs.
API_PATHS = "/api/"


def _problem(request: HttpRequest, answer: ProblemAnswer) -> HttpResponse:
    content = render_problem(answer, request.path, None)
    response = HttpResponse(content, status=answer.status, content_type=PROBLEM_JSON)
    for name, value in answer.headers.items():
        response[name] = value
    return response


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path_info.startswith(API_PATHS):
        return _problem(request, problem_for(exception))
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path_info.startswith(API_PATHS):
        return _problem(request, problem_for(exception))
    return defaults.permission_denied(request, exception)


def _slash_twin(path_info: str) -> str | None:
    """The API path a missed request most likely meant: the same with its trailing slash
    dropped (the API's paths have none), or added (its schema and docs have one)."""
    twin = path_info[:-1] if path_info.endswith("/") else path_info + "/"
    try:
        resolve(twin)
    except Resolver404:
        return None
    return twin


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path_info.startswith(API_PATHS):
        twin = _slash_twin(request.path_info)
        if twin is not None:
            path = request.path[: len(request.path) - len(request.path_info)] + twin
            return _problem(
                request, ProblemAnswer(404, "not_found", f"Not found; did you mean {path}?")
            )
        return _problem(request, problem_for(exception))
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if request.path_info.startswith(API_PATHS):  # Django has logged the error
        return _problem(request, problem_for(Exception()))
    return defaults.server_error(request)
