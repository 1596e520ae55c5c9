"""Keep passwords out of logs and printed messages. No Django import: the launcher uses it too."""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit, urlunsplit

# scheme://user:password@host -> scheme://user:***@host; also matches inside longer text.
_USERINFO_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)[^@\s]*@")


def redact_url(url: str) -> str:
    """Return ``url`` with any password replaced by ``***`` (unparsable input is masked whole)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable url>"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def redact_text(text: str) -> str:
    """Mask the password of every URL embedded in ``text``."""
    return _USERINFO_PASSWORD.sub(r"\g<head>***@", text)


class RedactPasswordsFilter(logging.Filter):
    """Logging filter: rewrites a record whose message contains a URL with a password."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact_text(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True
