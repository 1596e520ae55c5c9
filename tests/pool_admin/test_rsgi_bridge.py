"""The RSGI bridge (pool_admin/rsgi_bridge.py) served by real granian, as make run serves the
project (``--interface rsgi``, uvloop), around tests/harness/bridge_app.py: a WSGI application
that shows what it is given, with a 1 s body deadline and a 1,000-byte body limit.

The environ is compared with what granian's own WSGI interface gives the same application for
the same bytes; the differences are the bridge's, each stated.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pool_admin.rsgi_bridge import AccessLog
from tests.harness import bridge_app
from tests.harness.raw_http import chunks, exchange, request
from tests.harness.web_server import serving

pytestmark = pytest.mark.slow


def granian(interface: str, target: str) -> Callable[[int], list[str]]:
    """granian's command line serving ``target`` on a port, one worker."""

    def command(port: int) -> list[str]:
        argv = [
            sys.executable, "-m", "granian", "--interface", interface, target,
            "--host", "127.0.0.1", "--port", str(port), "--workers", "1", "--no-ws",
        ]  # fmt: skip
        return [*argv, "--loop", "uvloop"] if interface == "rsgi" else argv

    return command


def _served(tmp_path_factory, interface: str, target: str) -> Iterator[int]:
    log = tmp_path_factory.mktemp(interface) / "granian.log"
    with serving(granian(interface, target), log, None, "/closes") as port:
        yield port


@pytest.fixture(scope="module")
def bridge(tmp_path_factory) -> Iterator[int]:
    yield from _served(tmp_path_factory, "rsgi", "tests.harness.bridge_app:application")


@pytest.fixture(scope="module")
def plain_wsgi(tmp_path_factory) -> Iterator[int]:
    yield from _served(tmp_path_factory, "wsgi", "tests.harness.bridge_app:wsgi_application")


def shown(port: int, raw: bytes) -> dict[str, str]:
    status, _, body = exchange(port, raw)
    assert status == 200, body
    return json.loads(body)


def closes(port: int) -> list[str]:
    return json.loads(exchange(port, request("GET", "/closes", Host="t"))[2])


#: The environ's keys that differ by nature between two servers and two connections.
_BY_NATURE = {"SERVER_PORT", "REMOTE_PORT", "HTTP_HOST", "thread"}


def comparable(environ: dict[str, str]) -> dict[str, str]:
    """Without the keys that differ by nature, and with the bridge's stated differences from
    granian's WSGI interface taken out: its own body stream, ``wsgi.file_wrapper`` (granian's
    WSGI has none) and ``wsgi.multiprocess`` true (a worker process per core, so another
    process does run the same application; granian's WSGI says false)."""
    differences = {"wsgi.input": None, "wsgi.file_wrapper": None, "wsgi.multiprocess": None}
    return {k: v for k, v in environ.items() if k not in _BY_NATURE and k not in differences}


def test_the_environ_is_the_one_granians_wsgi_interface_gives(bridge, plain_wsgi):
    body = b"hello"
    sent = request(
        "POST", "/a%20b/%C3%A9/x%FF?q=1%202&r", body,
        Host="example.test", **{"X-Dup": "1"}, **{"Content-Type": "text/plain"},
        **{"Content-Length": str(len(body))}, Cookie="a=1",
    )  # fmt: skip
    sent = sent.replace(b"Cookie: a=1\r\n", b"Cookie: a=1\r\nCookie: b=2\r\nX-Dup: 2\r\n")
    through_bridge, through_wsgi = shown(bridge, sent), shown(plain_wsgi, sent)

    assert through_bridge["thread"].startswith("wsgi_")
    assert through_bridge["REMOTE_ADDR"] == "127.0.0.1"
    assert through_bridge["HTTP_HOST"] == through_wsgi["HTTP_HOST"] == "example.test"
    assert through_bridge["HTTP_COOKIE"] == "a=1;b=2" and through_bridge["HTTP_X_DUP"] == "1,2"
    assert through_bridge["body_length"] == 5
    assert through_bridge["wsgi.input"] == "BytesIO"
    assert through_bridge["wsgi.file_wrapper"] == "type" and "wsgi.file_wrapper" not in through_wsgi
    assert (
        through_bridge["wsgi.multiprocess"] is True and through_wsgi["wsgi.multiprocess"] is False
    )
    assert through_bridge["wsgi.version"] == through_wsgi["wsgi.version"] == [1, 0]
    # One more difference: a path whose bytes are not UTF-8 (%FF) reaches the bridge as RSGI
    # gives it, with U+FFFD in their place; granian's WSGI passes the byte itself.
    assert through_wsgi.pop("PATH_INFO") == "/a b/\u00c3\u00a9/x\u00ff"
    assert through_bridge.pop("PATH_INFO") == "/a b/é/x\ufffd".encode().decode("latin-1")
    assert comparable(through_bridge) == comparable(through_wsgi)


def test_http_1_0_without_host_gets_an_empty_host_as_under_wsgi(bridge, plain_wsgi):
    sent = request("GET", "/x", version="1.0")
    through_bridge, through_wsgi = shown(bridge, sent), shown(plain_wsgi, sent)
    assert through_bridge["HTTP_HOST"] == through_wsgi["HTTP_HOST"] == ""
    # granian's WSGI says "HTTP/1" for 1.0; the bridge names it as PEP 3333 does.
    assert through_wsgi.pop("SERVER_PROTOCOL") == "HTTP/1"
    assert through_bridge.pop("SERVER_PROTOCOL") == "HTTP/1.0"
    assert comparable(through_bridge) == comparable(through_wsgi)


def test_an_absolute_url_gives_its_authority_only_without_a_host_as_under_wsgi(bridge, plain_wsgi):
    sent = request("GET", "http://example.test/x", version="1.0")
    through_bridge, through_wsgi = shown(bridge, sent), shown(plain_wsgi, sent)
    assert through_bridge["HTTP_HOST"] == through_wsgi["HTTP_HOST"] == "example.test"
    for host in ("example.test", "other.test"):
        sent = request("GET", "http://example.test/x", Host=host)
        through_bridge, through_wsgi = shown(bridge, sent), shown(plain_wsgi, sent)
        assert through_bridge["HTTP_HOST"] == through_wsgi["HTTP_HOST"] == host


def test_a_header_name_with_an_underscore_is_dropped(bridge):
    environ = shown(bridge, request("GET", "/x", Host="t", **{"X_Forwarded_For": "10.0.0.1"}))
    assert "HTTP_X_FORWARDED_FOR" not in environ


def test_a_chunked_body_is_read_to_one_byte_over_the_limit_and_passed_without_a_length(bridge):
    head = {"Host": "t", "Transfer-Encoding": "chunked"}
    within = b"c" * 700
    environ = shown(bridge, request("POST", "/x", chunks(within, 100), **head))
    assert "CONTENT_LENGTH" not in environ and environ["HTTP_TRANSFER_ENCODING"] == "chunked"
    assert environ["body_length"] == 700
    assert environ["body_sha256"] == hashlib.sha256(within).hexdigest()
    over = b"o" * 5000
    environ = shown(bridge, request("POST", "/x", chunks(over, 100), **head))
    assert environ["body_length"] == bridge_app.BODY_LIMIT + 1


def test_a_declared_length_over_the_limit_is_not_read_and_cannot_be_misread(bridge):
    """Only the headers are sent: the answer comes at once, so nothing waited for the body."""
    sent = request("POST", "/x", Host="t", **{"Content-Length": "5000"})
    started = time.monotonic()
    environ = shown(bridge, sent)
    assert time.monotonic() - started < bridge_app.BODY_TIMEOUT_S
    assert environ["CONTENT_LENGTH"] == "5000"
    assert "read_error" in environ and "body_length" not in environ


def test_a_body_that_arrives_in_pieces_within_the_deadline_is_read_whole(bridge):
    body = bytes(range(256)) * 2
    with socket.create_connection(("127.0.0.1", bridge), timeout=5) as sock:
        sock.sendall(request("POST", "/x", Host="t", **{"Content-Length": str(len(body))}))
        for start in range(0, len(body), 128):
            time.sleep(0.1)
            sock.sendall(body[start : start + 128])
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    environ = json.loads(answer.partition(b"\r\n\r\n")[2])
    assert environ["body_sha256"] == hashlib.sha256(body).hexdigest()


def test_a_body_late_past_the_deadline_is_refused_and_the_application_never_sees_it(bridge):
    closed_before = len(closes(bridge))
    with socket.create_connection(("127.0.0.1", bridge), timeout=5) as sock:
        sock.sendall(request("POST", "/late", b"abc", Host="t", **{"Content-Length": "100"}))
        started = time.monotonic()
        answer = b""
        while chunk := sock.recv(65536):  # the server closes the connection after its answer
            answer += chunk
        took = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert answer.endswith(b"late: /late")
    assert bridge_app.BODY_TIMEOUT_S - 0.2 < took < bridge_app.BODY_TIMEOUT_S + 1.5
    assert len(closes(bridge)) == closed_before  # no answer of the application's was made


def half_closed(port: int, raw: bytes) -> dict[str, str]:
    """What the application was given for ``raw`` sent and the sending side then closed (the
    client stops sending, still reading), as a client cut off mid-body looks to the server."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return json.loads(answer.partition(b"\r\n\r\n")[2])


def test_a_body_cut_off_reaches_the_application_unreadable_not_short(bridge):
    by_length = request("POST", "/x", b"ab", Host="t", **{"Content-Length": "100"})
    assert "body_length" not in half_closed(bridge, by_length)
    chunked = request("POST", "/x", b"5\r\nhello\r\n", Host="t", **{"Transfer-Encoding": "chunked"})
    environ = half_closed(bridge, chunked)
    assert "read_error" in environ and "body_length" not in environ


def test_a_malformed_chunked_body_and_one_with_trailers_are_unreadable(bridge):
    """granian gives both as it gives a body cut off: neither is taken for a whole body."""
    head = {"Host": "t", "Transfer-Encoding": "chunked"}
    malformed = request("POST", "/x", b"5\r\nhello\r\nZZ\r\n", **head)
    with_trailers = request("POST", "/x", b"5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n", **head)
    for sent in (malformed, with_trailers):
        status, _, body = exchange(bridge, sent, timeout=3)
        assert status == 200 and "read_error" in json.loads(body), body


def test_a_chunked_body_over_the_limit_is_not_read_to_its_end(bridge):
    """2,000 bytes of chunks and no last chunk: answered at once, not after the deadline."""
    sent = request("POST", "/x", chunks(b"n" * 2000, 100)[: -len(b"0\r\n\r\n")], Host="t",
                   **{"Transfer-Encoding": "chunked"})  # fmt: skip
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", bridge), timeout=5) as sock:
        sock.sendall(sent)
        answer = b""
        while b"}" not in answer:
            answer += sock.recv(65536)
    assert time.monotonic() - started < bridge_app.BODY_TIMEOUT_S
    assert json.loads(answer.partition(b"\r\n\r\n")[2])["body_length"] == bridge_app.BODY_LIMIT + 1


def get(port: int, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_a_long_answer_arrives_whole_and_is_closed_once_on_an_application_thread(bridge):
    before = closes(bridge)
    status, body = get(bridge, "/long?chunks=8")  # 512 KiB, empty chunks between
    assert status == 200 and body == bridge_app.CHUNK * 8
    after = closes(bridge)
    assert len(after) == len(before) + 1 and after[-1].startswith("wsgi_")


def file_reads(port: int) -> int:
    return int(json.loads(get(port, "/file-reads")[1]))


def test_a_whole_file_is_sent_from_disk_and_a_part_of_one_is_read(bridge):
    source = Path(bridge_app.SOURCE).read_bytes()
    before = closes(bridge)
    assert get(bridge, "/file") == (200, source)
    assert get(bridge, "/file?from=100") == (200, source[100:])
    after = closes(bridge)
    assert len(after) == len(before) + 2 and all(t.startswith("wsgi_") for t in after[-2:])


def test_only_a_plain_file_object_read_from_its_start_is_sent_from_disk(bridge):
    """A file object of another type may not give the file's bytes as they are on disk (a
    GzipFile decodes them): it is read like any answer, as is a file read from an offset."""
    source = Path(bridge_app.SOURCE).read_bytes()
    reads = file_reads(bridge)
    assert get(bridge, "/file?counted") == (200, source)
    assert file_reads(bridge) > reads
    reads = file_reads(bridge)
    assert get(bridge, "/file?counted&from=100") == (200, source[100:])
    assert file_reads(bridge) > reads


def test_a_file_whose_path_names_another_file_by_now_is_sent_as_opened(bridge):
    assert get(bridge, "/file-replaced") == (200, b"the file opened")


def test_an_ordinary_answer_is_closed_once_on_the_thread_that_made_it(bridge):
    before = closes(bridge)
    environ = shown(bridge, request("GET", "/x", Host="t"))
    assert closes(bridge) == [*before, environ["thread"]]


def test_write_and_the_returned_parts_make_the_answer(bridge):
    assert get(bridge, "/write") == (200, b"written returned")


def test_an_application_error_is_a_500_and_the_next_request_is_answered(bridge):
    assert get(bridge, "/raise")[0] == 500
    assert get(bridge, "/write") == (200, b"written returned")


def test_an_error_while_the_answer_is_made_is_a_500_not_a_short_200(bridge):
    assert get(bridge, "/raise-late") == (500, b"")


def test_start_response_with_exc_info_replaces_the_answer_not_yet_sent(bridge):
    assert get(bridge, "/error-page") == (503, b"the error page")


def test_start_response_with_exc_info_after_a_part_of_the_answer_raises_it(bridge):
    """PEP 3333: once a part of the answer is made, the headers count as sent."""
    assert get(bridge, "/error-after-part") == (500, b"")


def access_log(port: int) -> list[str]:
    return json.loads(exchange(port, request("GET", "/access-log", Host="t"))[2])


#: granian's default access log line: time, client, request line, status, milliseconds.
_LINE = re.compile(
    r'\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4}\] 127\.0\.0\.1 - "(?P<request>[^"]*)" '
    r"(?P<status>\d{3}) (?P<ms>\d+\.\d{3})"
)


def logged(port: int, since: int, count: int) -> list[tuple[str, int, float]]:
    """The ``count`` access log lines after the first ``since``, but for the lines of the
    ``/access-log`` requests themselves: request line, status, milliseconds. A line is written
    once the request is done, which may be just after its answer reached the client, so the
    log is read again until they are all there (at most 5 s)."""
    deadline = time.monotonic() + 5
    while True:
        lines = [line for line in access_log(port)[since:] if " /access-log " not in line]
        if len(lines) >= count or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    matches = [_LINE.fullmatch(line) for line in lines]
    assert all(matches), lines
    return [(m["request"], int(m["status"]), float(m["ms"])) for m in matches if m]


def test_every_answer_gets_one_access_log_line_with_its_status(bridge):
    since = len(access_log(bridge))
    get(bridge, "/write?secret=k")
    get(bridge, "/raise")
    get(bridge, "/raise-late")
    get(bridge, "/error-page")
    lines = logged(bridge, since, 4)
    assert [(request, status) for request, status, _ in lines] == [
        ("GET /write HTTP/1.1", 200),  # the path without its query string
        ("GET /raise HTTP/1.1", 500),
        ("GET /raise-late HTTP/1.1", 500),
        ("GET /error-page HTTP/1.1", 503),
    ]
    assert all(0 <= ms < 5_000 for _, _, ms in lines)


def test_a_body_refused_as_late_gets_its_408_line_with_the_time_it_took(bridge):
    since = len(access_log(bridge))
    with socket.create_connection(("127.0.0.1", bridge), timeout=5) as sock:
        sock.sendall(request("POST", "/late", b"abc", Host="t", **{"Content-Length": "100"}))
        while sock.recv(65536):
            pass
    [(line, status, ms)] = logged(bridge, since, 1)
    assert (line, status) == ("POST /late HTTP/1.1", 408)
    assert bridge_app.BODY_TIMEOUT_S * 1000 - 200 < ms < bridge_app.BODY_TIMEOUT_S * 1000 + 1500


def test_a_path_cannot_break_its_access_log_line(bridge):
    since = len(access_log(bridge))
    for target in ("/a%22b%5Cc%0Ad%00e", "/%E4%BD%A0%E5%A5%BD", "/x%7F%C2%85y"):
        get(bridge, target)
    lines = [request for request, _, _ in logged(bridge, since, 3)]
    assert lines == [
        "GET /a\\x22b\\x5cc\\x0ad\\x00e HTTP/1.1",
        "GET /你好 HTTP/1.1",  # printable: as it is
        "GET /x\\x7f\\x85y HTTP/1.1",
    ]


def test_an_ipv6_client_is_written_in_brackets_as_granian_wrote_it():
    lines: list[str] = []
    environ = {"REMOTE_ADDR": "::1", "REQUEST_METHOD": "GET", "SERVER_PROTOCOL": "HTTP/1.1"}
    AccessLog(lines.append).write((time.time(), time.perf_counter()), environ, "/x", 204)
    [line] = lines
    assert ' [::1] - "GET /x HTTP/1.1" 204 ' in line
