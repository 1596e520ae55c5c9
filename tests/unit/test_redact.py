"""Passwords in URLs never reach a log line or a printed message."""

import logging

from activity.redact import RedactPasswordsFilter, redact_text, redact_url


def test_redact_url():
    assert redact_url("redis://:s3cret@h:6379/0") == "redis://:***@h:6379/0"
    assert redact_url("postgresql://u:p%40ss@h/db") == "postgresql://u:***@h/db"
    assert redact_url("redis://h:6379/0") == "redis://h:6379/0"
    assert redact_url("redis://[::1") == "<unparsable url>"


def test_redact_text_masks_every_url_in_a_message():
    text = "broker redis://u:pw1@a:1/0 and db postgres://x:pw2@b/c failed"
    cleaned = redact_text(text)
    assert "pw1" not in cleaned and "pw2" not in cleaned
    assert "redis://u:***@a:1/0" in cleaned and "postgres://x:***@b/c" in cleaned


def test_logging_filter_rewrites_formatted_message():
    record = logging.LogRecord(
        "x", logging.INFO, __file__, 1, "connect %s", ("redis://:pw@h/0",), None
    )
    assert RedactPasswordsFilter().filter(record)
    assert record.getMessage() == "connect redis://:***@h/0"
