"""pool_admin.bodyguard.BodyDeadline in-process, with a wsgi.input that blocks like granian's."""

import io
import json
import threading
import time

import pytest

from pool_admin.bodyguard import BodyDeadline


class BlockingInput:
    """``read`` returns ``data`` only once ``arrive`` is set (a client still sending)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.arrive = threading.Event()
        self.reads = 0

    def read(self, size=None):
        self.reads += 1
        self.arrive.wait(10)
        return self.data[:size]


class Recorder:
    def __init__(self):
        self.bodies = []

    def __call__(self, environ, start_response):
        self.bodies.append((environ["wsgi.input"].read(), environ.get("CONTENT_LENGTH")))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]


def call(app, environ):
    seen = {}

    def start_response(status, headers, exc_info=None):
        seen["status"], seen["headers"] = int(status[:3]), dict(headers)

    body = b"".join(app(environ, start_response))
    return seen["status"], seen["headers"], body


def post(stream, length=None, **extra):
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/api/v1/extract", "wsgi.input": stream}
    if length is not None:
        environ["CONTENT_LENGTH"] = str(length)
    return environ | extra


def guard(app, **options):
    return BodyDeadline(app, **({"max_body": 100, "concurrency": 2, "timeout_s": 0.3} | options))


def test_a_body_that_arrived_is_handed_to_the_app_in_full():
    app = Recorder()
    stream = BlockingInput(b'{"count":1}')
    stream.arrive.set()
    assert call(guard(app), post(stream, 11))[0] == 200
    assert app.bodies == [(b'{"count":1}', "11")]


def test_a_stalled_body_is_a_408_within_the_deadline_and_the_app_never_runs():
    app = Recorder()
    guarded = guard(app)
    stream = BlockingInput(b"x" * 50)
    started = time.monotonic()
    status, headers, body = call(guarded, post(stream, 50))
    assert status == 408 and 0.3 <= time.monotonic() - started < 2
    assert headers["Connection"] == "close"
    assert headers["Content-Type"] == "application/problem+json"
    assert json.loads(body)["code"] == "request_timeout"
    assert app.bodies == [] and guarded.stalled_readers == 1

    stream.arrive.set()  # the client finally sends the rest: its abandoned reader ends
    deadline = time.monotonic() + 5
    while guarded.stalled_readers and time.monotonic() < deadline:
        time.sleep(0.01)
    assert guarded.stalled_readers == 0


def test_requests_without_a_body_never_wait():
    def answer(environ, start_response):
        start_response("200 OK", [])
        return [b""]

    stream = BlockingInput(b"")  # would block: must not be read ahead
    for environ in (
        post(stream),
        post(stream, 0),
        post(stream, "x"),
        {**post(stream), "REQUEST_METHOD": "GET"},
    ):
        assert call(guard(answer), environ)[0] == 200
    assert stream.reads == 0


def test_a_declared_length_over_the_limit_is_left_for_the_app_to_refuse_unread():
    app = Recorder()
    stream = io.BytesIO(b"y" * 200)
    call(guard(app), post(stream, 200))
    assert app.bodies == [(b"y" * 200, "200")]  # the app's own stream, untouched


def test_a_chunked_body_is_read_to_its_end_and_given_a_length():
    app = Recorder()
    chunked = post(io.BytesIO(b'{"count":2}'), HTTP_TRANSFER_ENCODING="chunked")
    assert call(guard(app), chunked)[0] == 200
    assert app.bodies == [(b'{"count":2}', "11")]


def test_a_chunked_body_over_the_limit_is_a_413_and_the_app_never_runs():
    app = Recorder()
    chunked = post(io.BytesIO(b"z" * 101), HTTP_TRANSFER_ENCODING="chunked")
    status, _, body = call(guard(app), chunked)
    assert status == 413 and json.loads(body)["code"] == "payload_too_large"
    assert app.bodies == []


def test_past_the_bound_of_stalled_readers_bodies_are_refused_at_once():
    app = Recorder()
    guarded = guard(app, max_stalled=1)
    first = BlockingInput(b"a")
    assert call(guarded, post(first, 1))[0] == 408
    second = BlockingInput(b"b")
    second.arrive.set()
    status, headers, _ = call(guarded, post(second, 1))
    assert status == 503 and headers["Retry-After"] and second.reads == 0
    first.arrive.set()


def test_a_read_that_fails_fails_the_request_on_its_own_thread():
    class Broken:
        def read(self, size=None):
            raise OSError("connection reset")

    with pytest.raises(OSError, match="connection reset"):
        call(guard(Recorder()), post(Broken(), 10))


def test_no_more_than_concurrency_requests_run_the_app_at_once():
    running, most = 0, 0
    lock = threading.Lock()

    def slow_app(environ, start_response):
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        start_response("200 OK", [])
        return [b""]

    guarded = guard(slow_app, concurrency=2)
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/", "wsgi.input": io.BytesIO()}
    threads = [threading.Thread(target=call, args=(guarded, dict(environ))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most == 2


@pytest.mark.parametrize(
    "options", [{"timeout_s": 0}, {"max_body": -1}, {"max_stalled": 0}, {"concurrency": 0}]
)
def test_bad_options_are_refused(options):
    with pytest.raises(ValueError):
        guard(Recorder(), **options)
