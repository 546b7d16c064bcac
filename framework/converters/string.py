"""``StringConverter``: text in a configurable encoding (``converter.encoding``, UTF-8 by default)."""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass
from typing import Any

from mirrorline.api.config import Config, ConfigDef, ConfigKey, Importance, Type, Validator
from mirrorline.api.converters import Converter, HeaderConverter, Schema, schema_of
from mirrorline.api.errors import DataError

OPTIONAL_STRING = schema_of("string", optional=True)


@dataclass(frozen=True)
class Encoding(Validator):
    """The name of a character encoding Python knows (``UTF8``, ``UTF-8``, ``ISO-8859-1``...)."""

    def __call__(self, name: str, value: Any) -> None:
        try:
            codecs.lookup(value)
        except (LookupError, TypeError):
            raise ValueError(f"unknown encoding {value!r}") from None

    def __str__(self) -> str:
        return "a character encoding name"


def as_text(value: Any) -> str:
    """The text for a non-string value, as Connect's ``toString()`` reads for the common types
    (``true``/``false``; numbers; lists and dicts as compact JSON, where Java prints ``{a=1}``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return str(value)


class StringConverter(Converter, HeaderConverter):
    """Text: ``from_data`` encodes ``str(value)``, ``to_data`` decodes (Connect's ``StringConverter``).

    Beyond Connect: a value that is already bytes is written unchanged (Connect would write the
    Java object's ``toString()``).
    """

    aliases = ("org.apache.kafka.connect.storage.StringConverter",)
    config_def = ConfigDef([
        ConfigKey("converter.encoding", Type.STRING, default="UTF-8", validator=Encoding(),
                  importance=Importance.HIGH, doc="The name of the Java charset (Python codec) to be used for "
                                                  "encoding and decoding strings."),
    ])

    def __init__(self) -> None:
        self.encoding = "utf-8"

    def configure(self, settings: Config, is_key: bool) -> None:
        """Remember the encoding."""
        self.encoding = codecs.lookup(settings["converter.encoding"]).name

    def from_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        """The value's text, encoded; None stays None."""
        if value is None:
            return None
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        try:
            return as_text(value).encode(self.encoding)
        except UnicodeEncodeError as exc:
            raise DataError(f"Failed to serialize to a string: {exc}") from None

    def to_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        """``(optional string schema, the decoded text)``."""
        if data is None:
            return OPTIONAL_STRING, None
        try:
            return OPTIONAL_STRING, bytes(data).decode(self.encoding)
        except UnicodeDecodeError as exc:
            raise DataError(f"Failed to deserialize string: {exc}") from None

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        """As :meth:`from_data`."""
        return self.from_data(topic, schema, value)

    def to_connect_header(self, topic: str, header_key: str, data: bytes | None) -> tuple[Schema | None, Any]:
        """As :meth:`to_data`."""
        return self.to_data(topic, data)
