"""The API's JSON body parser: :func:`parse_json`, for DRF's views and the fast extract alike.

DRF's JSON parsing (strict: no ``NaN``; errors ``JSON parse error - ...``), and a body nested too
deeply refused as any other bad body, a 400 ``invalid_request`` (Python's parser gives up with
RecursionError, a 500 otherwise).
"""

from __future__ import annotations

from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError
from rest_framework.utils import json as drf_json


def parse_json(raw: bytes, encoding: str = "utf-8") -> Any:
    """The JSON value of a body, or ``ParseError``."""
    try:
        text = raw.decode(encoding)
        data = drf_json.loads(text)  # DRF's strict JSON: no NaN
    except RecursionError:
        raise ParseError("JSON parse error - the body is nested too deeply.") from None
    except ValueError as exc:
        raise ParseError(f"JSON parse error - {exc}") from None
    return data


class JSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        encoding = parsers.get_encoding(parser_context or {})  # DRF's charset checks
        return parse_json(stream.read(), encoding)
