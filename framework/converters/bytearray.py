"""``ByteArrayConverter``: bytes through unchanged, Connect's pass-through converter and mirrorline's default."""

from __future__ import annotations

from typing import Any

from mirrorline.api.converters import Converter, HeaderConverter, Schema, schema_of
from mirrorline.api.errors import DataError

OPTIONAL_BYTES = schema_of("bytes", optional=True)


class ByteArrayConverter(Converter, HeaderConverter):
    """Keys, values and header values stay the bytes they are (Connect's ``ByteArrayConverter``).

    With this converter in all three roles the runtime skips conversion altogether.
    """

    aliases = ("org.apache.kafka.connect.converters.ByteArrayConverter",)
    passthrough = True

    def from_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        """``value`` itself; DataError unless it is bytes (or None) and ``schema`` is none or bytes."""
        if schema is not None and schema.get("type") != "bytes":
            raise DataError(f"Invalid schema type for ByteArrayConverter: {str(schema.get('type')).upper()}")
        if value is not None and not isinstance(value, (bytes, bytearray, memoryview)):
            raise DataError(f"ByteArrayConverter is not compatible with objects of type {type(value).__name__}")
        return bytes(value) if value is not None and not isinstance(value, bytes) else value

    def to_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        """``(optional bytes schema, data)``."""
        return OPTIONAL_BYTES, data

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        """The header value itself, as for keys and values."""
        return self.from_data(topic, schema, value)

    def to_connect_header(self, topic: str, header_key: str, data: bytes | None) -> tuple[Schema | None, Any]:
        """``(optional bytes schema, data)``."""
        return OPTIONAL_BYTES, data
