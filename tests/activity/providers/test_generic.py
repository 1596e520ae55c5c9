"""The generic readers (activity/providers/generic.py): built from an upstream's settings,
reading answers as the presets do; settings that cannot read an answer are refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from activity.providers.errors import VendorError
from activity.providers.generic import json_reader, text_reader
from activity.providers.presets import UpstreamOptions

SENT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
OPTIONS = UpstreamOptions("http", timedelta(minutes=5), 100)


def test_a_json_reader_takes_its_list_and_fields_by_path():
    reader = json_reader({"list_path": "data.items", "fields": {"host": "ip", "port": "p",
                          "username": "u", "password": "pw", "expiry": "until"},
                          "expiry": "unix_seconds", "success_path": "code"}, OPTIONS)  # fmt: skip
    until = int((SENT + timedelta(minutes=2)).timestamp())
    body = {"code": 0, "data": {"items": [{"ip": "1.2.3.4", "p": 8080, "u": "a", "pw": "b",
                                           "until": until}]}}  # fmt: skip
    [entry] = reader.parse(json.dumps(body).encode(), SENT).entries
    assert (entry.host, entry.port, entry.username, entry.password) == (
        "1.2.3.4",
        8080,
        "a",
        "b",
    )
    assert entry.expires_at == SENT + timedelta(minutes=2)
    with pytest.raises(VendorError):
        reader.parse(json.dumps({"code": 7, "data": {"items": []}}).encode(), SENT)


def test_a_text_reader_takes_its_line_shape():
    reader = text_reader({"line": "user:pass@host:port"}, OPTIONS)
    [entry] = reader.parse(b"a:b@1.2.3.5:3128\n", SENT).entries
    assert (entry.host, entry.port, entry.username) == ("1.2.3.5", 3128, "a")
    assert entry.expires_at == SENT + timedelta(minutes=5)  # no expiry: the default lifetime


@pytest.mark.parametrize(
    "settings",
    [{}, {"list_path": ""}, {"list_path": "d", "fields": {"host": 1}},
     {"list_path": "d", "fields": {"address": "a", "host": None}}, {"list_path": "d", "x": 1}],
)  # fmt: skip
def test_json_settings_that_cannot_read_an_answer_are_refused(settings):
    with pytest.raises(ValueError):
        json_reader(settings, OPTIONS)
