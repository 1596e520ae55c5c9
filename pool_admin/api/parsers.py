"""The API's JSON body parser: :func:`parse_json`, for DRF's views and the fast extract alike.

DRF's JSON parsing (strict: no ``NaN``; errors ``JSON parse error - ...``), and two things it
lets through refused as any other bad body, a 400 ``invalid_request``: a body nested too deeply
(Python's parser gives up with RecursionError, a 500 otherwise) and a lone surrogate escape
(``"\\ud800"`` without its pair: Python decodes it into a string that is not text, which no
renderer, log line or Redis key can encode).
"""

from __future__ import annotations

import json
import re
from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError
from rest_framework.utils import json as drf_json

#: A ``\\uD800``-``\\uDFFF`` escape, paired or not; only then is the parsed body walked.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _holds_lone_surrogate(data: Any) -> bool:
    """Whether a string of ``data`` (key or value) holds a lone surrogate."""
    try:
        json.dumps(data, ensure_ascii=False, check_circular=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse_json(raw: bytes, encoding: str = "utf-8") -> Any:
    """The JSON value of a body, or ``ParseError``."""
    try:
        text = raw.decode(encoding)
        data = drf_json.loads(text)  # DRF's strict JSON: no NaN
        if _SURROGATE_ESCAPE.search(text) and _holds_lone_surrogate(data):
            raise ParseError(
                "JSON parse error - a string holds a lone surrogate escape (\\ud800-\\udfff "
                "without its pair), which is not text."
            )
    except RecursionError:
        raise ParseError("JSON parse error - the body is nested too deeply.") from None
    except ValueError as exc:
        raise ParseError(f"JSON parse error - {exc}") from None
    return data


class JSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        # DRF's charset checks (DRF 3.17+; the stubs pinned for Django 5.2 are older)
        encoding = parsers.get_encoding(parser_context or {})  # type: ignore[attr-defined]
        return parse_json(stream.read(), encoding)
