"""``SimpleHeaderConverter``: header values as plain text, typed back by their look (Connect's).

Writing: a string as its UTF-8 bytes; ``true``/``false``; numbers as written; lists and
dicts as compact JSON (Connect's ``Values.convertToString``); bytes as base64.
Reading (Connect's ``Values.parseString``): an empty string stays a string; ``true``/``false``
become booleans; an integer the smallest of int8/int16/int32/int64 that holds it; a decimal
number a float64; text starting with ``[`` or ``{`` that parses as JSON an array or a map;
anything else a string.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from mirrorline.api.converters import HeaderConverter, Schema, infer_schema, schema_of
from mirrorline.converters.string import as_text

_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")


def parse_string(text: str) -> tuple[Schema, Any]:
    """``(schema, value)`` a header's text means, as Connect's ``Values.parseString``."""
    stripped = text.strip()
    if not stripped:
        return schema_of("string"), text
    if stripped.lower() in ("true", "false"):
        return schema_of("boolean"), stripped.lower() == "true"
    if _INT.fullmatch(stripped):
        number = int(stripped)
        for type_, bits in (("int8", 8), ("int16", 16), ("int32", 32), ("int64", 64)):
            if -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
                return schema_of(type_), number
        return schema_of("string"), text
    if _FLOAT.fullmatch(stripped):
        return schema_of("float64"), float(stripped)
    if stripped[0] in "[{":
        try:
            value = json.loads(stripped)
        except ValueError:
            return schema_of("string"), text
        if isinstance(value, list):
            items = infer_schema(value)
            return (items or schema_of("array", items=None)), value
        return schema_of("map", keys=schema_of("string"), values=None), value
    return schema_of("string"), text


class SimpleHeaderConverter(HeaderConverter):
    """Header values as text, parsed back into booleans, numbers, arrays, maps or strings."""

    aliases = ("org.apache.kafka.connect.storage.SimpleHeaderConverter",)

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        """The value's text, UTF-8; None stays None."""
        if value is None:
            return None
        if isinstance(value, (bytes, bytearray)):
            return base64.b64encode(bytes(value))
        return as_text(value).encode("utf-8")

    def to_connect_header(self, topic: str, header_key: str, data: bytes | None) -> tuple[Schema | None, Any]:
        """``(schema, value)`` parsed from the header's text; undecodable bytes stay bytes."""
        if data is None:
            return None, None
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            return schema_of("bytes"), bytes(data)
        return parse_string(text)
