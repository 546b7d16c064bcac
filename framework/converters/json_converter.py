"""``JsonConverter``: Connect's JSON, with its ``{"schema": ..., "payload": ...}`` envelope by default.

Bytes are what Connect's ``JsonConverter`` writes: compact JSON (no spaces), UTF-8, the
envelope's schema keys in Connect's order. With ``schemas.enable=false`` the payload alone is
written and read. Logical types: Decimal (base64 of the unscaled value, Connect's default
``decimal.format=BASE64``), Date, Time and Timestamp map to ``decimal.Decimal`` and
``datetime`` values.

Beyond Connect: a source record that carries data but no schema gets one inferred from the
Python value (:func:`~mirrorline.api.converters.infer_schema`; ``schemas.infer.enable``), where
Connect writes ``"schema":null``. Floats print as Python does (``1e+20`` where Java writes
``1.0E20``).
"""

from __future__ import annotations

import json
from typing import Any

from mirrorline.api.config import Config, ConfigDef, ConfigKey, Importance, Range, Type
from mirrorline.api.converters import Converter, HeaderConverter, Schema, infer_schema
from mirrorline.api.errors import DataError
from mirrorline.converters.schema_json import normalise, to_connect, to_json

ENVELOPE_ERROR = ("JsonConverter with schemas.enable requires \"schema\" and \"payload\" fields and may not contain "
                  "additional fields. If you are trying to deserialize plain JSON data, set schemas.enable=false "
                  "in your converter configuration.")


def dumps(tree: Any) -> bytes:
    """A JSON tree as Connect's bytes: compact, UTF-8, non-ASCII characters unescaped."""
    return json.dumps(tree, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class JsonConverter(Converter, HeaderConverter):
    """JSON keys, values or header values, with Connect's schema envelope (``schemas.enable``)."""

    aliases = ("org.apache.kafka.connect.json.JsonConverter",)
    config_def = ConfigDef([
        ConfigKey("schemas.enable", Type.BOOLEAN, default="true", importance=Importance.HIGH,
                  doc="Include schemas within each of the serialized values and keys."),
        ConfigKey("schemas.cache.size", Type.INT, default=1000, validator=Range(min=0), importance=Importance.HIGH,
                  doc="The maximum number of schemas that can be cached in this converter instance "
                      "(accepted for compatibility; schemas are small dicts here and are not cached)."),
        ConfigKey("schemas.infer.enable", Type.BOOLEAN, default="true", importance=Importance.LOW,
                  doc="Beyond Connect: with schemas.enable, give data that comes without a schema one inferred "
                      "from the value (a dict becomes a struct, an int an int64...). false writes "
                      "\"schema\":null as Connect does."),
    ])

    def __init__(self) -> None:
        self.schemas_enable = True
        self.infer = True

    def configure(self, settings: Config, is_key: bool) -> None:
        """Remember the settings."""
        self.schemas_enable = settings["schemas.enable"]
        self.infer = settings["schemas.infer.enable"]

    def from_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        """The JSON bytes of ``value``: the envelope, or the payload alone without ``schemas.enable``."""
        if schema is None and value is None:
            return None
        schema = normalise(schema)
        if schema is None and self.infer and self.schemas_enable:
            schema = infer_schema(value)
        payload = to_json(schema, value)
        return dumps({"schema": schema, "payload": payload} if self.schemas_enable else payload)

    def to_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        """``(schema, value)`` of JSON bytes; DataError on bad JSON or a missing envelope."""
        if data is None:
            return None, None
        try:
            tree = json.loads(bytes(data))
        except (UnicodeDecodeError, ValueError) as exc:
            raise DataError(f"Converting byte[] to Kafka Connect data failed due to serialization error: "
                            f"{exc}") from None
        if not self.schemas_enable:
            return None, tree
        if not isinstance(tree, dict) or set(tree) != {"schema", "payload"}:
            raise DataError(ENVELOPE_ERROR)
        schema = normalise(tree["schema"])
        return schema, to_connect(schema, tree["payload"])

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        """As :meth:`from_data`."""
        return self.from_data(topic, schema, value)

    def to_connect_header(self, topic: str, header_key: str, data: bytes | None) -> tuple[Schema | None, Any]:
        """As :meth:`to_data`."""
        return self.to_data(topic, data)
