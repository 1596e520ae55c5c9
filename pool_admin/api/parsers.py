"""The API's JSON parser: DRF's, except that a body nested too deeply is a 400, not a 500."""

from __future__ import annotations

from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:  # Python's json gives up on deep nesting with this, not ValueError
            raise ParseError("JSON parse error - the body is nested too deeply.") from None
