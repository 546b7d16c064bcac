"""Transforms on record headers: ``InsertHeader``, ``DropHeaders``, ``HeaderFrom$Key``/``$Value``.

Header values are bytes here, as Kafka stores them. Where Connect would run a value through
its ``SimpleHeaderConverter``, these write what it writes: a string as its UTF-8 text, any
other JSON value (number, boolean, object, array) as its JSON text, null as a null header.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from mirrorline.api.config import Config, ConfigDef, ConfigKey, Importance, OneOf, Type
from mirrorline.api.errors import ConfigError
from mirrorline.api.records import SourceRecord
from mirrorline.transforms.json_fields import NonEmptyList, Part, decode_object, encode_object
from mirrorline.transforms.routing import JAVA_PACKAGE, BuiltinTransformation


def header_bytes(value: Any) -> bytes | None:
    """A JSON value as a header value: strings as their text, others as JSON, None as None."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


class InsertHeader(BuiltinTransformation):
    """Adds a header with a literal value to every record (Connect's InsertHeader)."""

    aliases = (f"{JAVA_PACKAGE}.InsertHeader",)
    config_def = ConfigDef([
        ConfigKey("header", Type.STRING, importance=Importance.HIGH, doc="The name of the header."),
        ConfigKey("value.literal", Type.STRING, importance=Importance.HIGH,
                  doc="The literal value that is to be set as the header value on all records."),
    ])

    def configure(self, config: Config) -> None:
        """Keep the header to add."""
        self.header = (config["header"], config["value.literal"].encode())

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        """The record with the header added after its others."""
        return dataclasses.replace(record, headers=[*record.headers, self.header])


class DropHeaders(BuiltinTransformation):
    """Removes every header with one of the given names (Connect's DropHeaders)."""

    aliases = (f"{JAVA_PACKAGE}.DropHeaders",)
    config_def = ConfigDef([
        ConfigKey("headers", Type.LIST, importance=Importance.HIGH, validator=NonEmptyList(),
                  doc="The name of the headers to be removed."),
    ])

    def configure(self, config: Config) -> None:
        """Keep the names to drop."""
        self.names = frozenset(config["headers"])

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        """The record without those headers (the others keep their order)."""
        if not any(name in self.names for name, _ in record.headers):
            return record
        return dataclasses.replace(record, headers=[h for h in record.headers if h[0] not in self.names])


class _HeaderFrom(BuiltinTransformation):
    """Copies or moves fields of a JSON-object key or value into headers (Connect's HeaderFrom)."""

    part: Part
    config_def = ConfigDef([
        ConfigKey("fields", Type.LIST, importance=Importance.HIGH, validator=NonEmptyList(),
                  doc="Field names in the record whose values are to be copied or moved to headers."),
        ConfigKey("headers", Type.LIST, importance=Importance.HIGH, validator=NonEmptyList(),
                  doc="Header names, in the same order as the field names listed in the fields configuration "
                      "property."),
        ConfigKey("operation", Type.STRING, importance=Importance.HIGH, validator=OneOf(("move", "copy")),
                  doc="Either 'move' if the fields are to be moved to the headers (removed from the key/value), "
                      "or 'copy' if the fields are to be copied to the headers (retained in the key/value)."),
        ConfigKey("replace.null.with.default", Type.BOOLEAN, default=True, importance=Importance.MEDIUM,
                  doc="Accepted for compatibility with Connect; keys and values here have no schema, so there "
                      "is no default to replace a null with."),
    ])

    def configure(self, config: Config) -> None:
        """Pair fields with headers; ConfigError unless there are as many of each."""
        if len(config["fields"]) != len(config["headers"]):
            raise ConfigError("'fields' config must have the same number of elements as 'headers' config.")
        self.pairs = list(zip(config["fields"], config["headers"], strict=True))
        self.move = config["operation"] == "move"

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        """The record with the fields' values added as headers (and removed from the object if moving)."""
        data = decode_object(self, record)
        if data is None:
            return record
        headers = [*record.headers, *((header, header_bytes(data.get(field))) for field, header in self.pairs)]
        if not self.move:
            return dataclasses.replace(record, headers=headers)
        for field, _ in self.pairs:
            data.pop(field, None)
        return dataclasses.replace(record, headers=headers, **{self.part: encode_object(data)})


class HeaderFromKey(_HeaderFrom):
    """HeaderFrom on the record key (``HeaderFrom$Key``)."""

    part = "key"
    aliases = (f"{JAVA_PACKAGE}.HeaderFrom$Key", "HeaderFrom$Key")


class HeaderFromValue(_HeaderFrom):
    """HeaderFrom on the record value (``HeaderFrom$Value``)."""

    part = "value"
    aliases = (f"{JAVA_PACKAGE}.HeaderFrom$Value", "HeaderFrom$Value")
