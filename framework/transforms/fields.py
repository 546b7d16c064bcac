"""Transforms on the fields of a JSON-object key or value: ``InsertField``, ``ReplaceField``, ``MaskField``.

Each comes as ``...$Key`` and ``...$Value`` (Python classes ``InsertFieldKey``,
``InsertFieldValue`` ...), with Connect's settings and defaults. Without schemas, Connect's
schema-only settings (``replace.null.with.default``) are accepted and have no effect.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from mirrorline.api.config import Config, ConfigDef, ConfigKey, Importance, Type, Validator
from mirrorline.api.errors import DataError
from mirrorline.api.records import SourceRecord
from mirrorline.transforms.json_fields import NonEmptyList, Part, decode_object, encode_object
from mirrorline.transforms.routing import JAVA_PACKAGE, BuiltinTransformation

_REPLACE_NULL = ConfigKey("replace.null.with.default", Type.BOOLEAN, default=True, importance=Importance.MEDIUM,
                          doc="Accepted for compatibility with Connect; keys and values here have no schema, so "
                              "there is no default to replace a null with.")


def _field(spec: str | None) -> str | None:
    """A field name without Connect's ``!`` (required) / ``?`` (optional) suffix, which only schemas use."""
    return spec[:-1] if spec and spec[-1] in "!?" else spec


class _FieldTransform(BuiltinTransformation):
    """A transform that changes the fields of the record's ``part`` (key or value)."""

    part: Part

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        """The record with its key or value changed by ``change``; a null one passes unchanged.

        A JSON object in bytes comes back as compact JSON bytes; a dict (data from a converter,
        or a source task's value for one) comes back as a new dict, its schema cleared
        (``key_schema``/``value_schema`` None: a converter infers it again)."""
        current = record.key if self.part == "key" else record.value
        if isinstance(current, dict):
            return dataclasses.replace(record, **{self.part: self.change(record, dict(current)),
                                                  f"{self.part}_schema": None})
        data = decode_object(self, record)
        if data is None:
            return record
        return dataclasses.replace(record, **{self.part: encode_object(self.change(record, data))})

    def change(self, record: SourceRecord, data: dict[str, Any]) -> dict[str, Any]:  # pragma: no cover
        """The new object (``data`` is a fresh copy and may be changed in place)."""
        raise NotImplementedError


# ---------------------------------------------------------------------------------------
# InsertField
# ---------------------------------------------------------------------------------------

class _InsertField(_FieldTransform):
    """Adds fields from the record's metadata or a static value (Connect's InsertField)."""

    config_def = ConfigDef([
        ConfigKey("topic.field", Type.STRING, default=None, importance=Importance.MEDIUM,
                  doc="Field name for Kafka topic. Suffix with ! to make this a required field, or ? to keep it "
                      "optional (the default)."),
        ConfigKey("partition.field", Type.STRING, default=None, importance=Importance.MEDIUM,
                  doc="Field name for Kafka partition. Suffix with ! to make this a required field, or ? to keep "
                      "it optional (the default)."),
        ConfigKey("offset.field", Type.STRING, default=None, importance=Importance.MEDIUM,
                  doc="Field name for Kafka offset - only applicable to sink connectors. Suffix with ! to make this "
                      "a required field, or ? to keep it optional (the default)."),
        ConfigKey("timestamp.field", Type.STRING, default=None, importance=Importance.MEDIUM,
                  doc="Field name for record timestamp (epoch milliseconds). Suffix with ! to make this a required "
                      "field, or ? to keep it optional (the default)."),
        ConfigKey("static.field", Type.STRING, default=None, importance=Importance.MEDIUM,
                  doc="Field name for static data field. Suffix with ! to make this a required field, or ? to keep "
                      "it optional (the default)."),
        ConfigKey("static.value", Type.STRING, default=None, importance=Importance.MEDIUM,
                  doc="Static field value, if field name configured."),
        _REPLACE_NULL,
    ])

    def configure(self, config: Config) -> None:
        """Keep the field names (without their ``!``/``?`` suffixes)."""
        self.topic_field = _field(config["topic.field"])
        self.partition_field = _field(config["partition.field"])
        self.offset_field = _field(config["offset.field"])
        self.timestamp_field = _field(config["timestamp.field"])
        self.static_field = _field(config["static.field"])
        self.static_value = config["static.value"]

    def change(self, record: SourceRecord, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` with the configured fields set."""
        if self.topic_field:
            data[self.topic_field] = record.topic
        if self.partition_field and record.partition is not None:
            data[self.partition_field] = record.partition
        if self.offset_field:
            raise DataError("InsertField's offset.field is only supported for sink records (Connect's rule); "
                            "this is a source record")
        if self.timestamp_field and record.timestamp is not None:
            data[self.timestamp_field] = record.timestamp
        if self.static_field and self.static_value is not None:
            data[self.static_field] = self.static_value
        return data


class InsertFieldKey(_InsertField):
    """InsertField on the record key (``InsertField$Key``)."""

    part = "key"
    aliases = (f"{JAVA_PACKAGE}.InsertField$Key", "InsertField$Key")


class InsertFieldValue(_InsertField):
    """InsertField on the record value (``InsertField$Value``)."""

    part = "value"
    aliases = (f"{JAVA_PACKAGE}.InsertField$Value", "InsertField$Value")


# ---------------------------------------------------------------------------------------
# ReplaceField
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Renames(Validator):
    """A list of ``old:new`` pairs."""

    def __call__(self, name: str, value: Any) -> None:
        for pair in value or ():
            old, colon, new = pair.partition(":")
            if not colon or not old or not new or ":" in new:
                raise ValueError("Invalid rename mapping: " + pair)

    def __str__(self) -> str:
        return "list of colon-delimited pairs, e.g. foo:bar,abc:xyz"


class _ReplaceField(_FieldTransform):
    """Drops, keeps and renames fields (Connect's ReplaceField)."""

    config_def = ConfigDef([
        ConfigKey("exclude", Type.LIST, default="", importance=Importance.MEDIUM,
                  doc="Fields to exclude. This takes precedence over the fields to include."),
        ConfigKey("include", Type.LIST, default="", importance=Importance.MEDIUM,
                  doc="Fields to include. If specified, only these fields will be used."),
        ConfigKey("renames", Type.LIST, default="", importance=Importance.MEDIUM, validator=_Renames(),
                  doc="Field rename mappings."),
        ConfigKey("blacklist", Type.LIST, default=None, importance=Importance.LOW,
                  doc="Deprecated. Use exclude instead."),
        ConfigKey("whitelist", Type.LIST, default=None, importance=Importance.LOW,
                  doc="Deprecated. Use include instead."),
        _REPLACE_NULL,
    ])

    def configure(self, config: Config) -> None:
        """Keep the field sets (the deprecated names count when the new ones are not given)."""
        originals = config.originals
        self.exclude = frozenset(config["exclude"] if "exclude" in originals else config["blacklist"] or ())
        self.include = frozenset(config["include"] if "include" in originals else config["whitelist"] or ())
        self.renames = dict(pair.split(":", 1) for pair in config["renames"])

    def change(self, record: SourceRecord, data: dict[str, Any]) -> dict[str, Any]:
        """The kept fields, renamed, in their original order."""
        return {self.renames.get(name, name): value for name, value in data.items()
                if name not in self.exclude and (not self.include or name in self.include)}


class ReplaceFieldKey(_ReplaceField):
    """ReplaceField on the record key (``ReplaceField$Key``)."""

    part = "key"
    aliases = (f"{JAVA_PACKAGE}.ReplaceField$Key", "ReplaceField$Key")


class ReplaceFieldValue(_ReplaceField):
    """ReplaceField on the record value (``ReplaceField$Value``)."""

    part = "value"
    aliases = (f"{JAVA_PACKAGE}.ReplaceField$Value", "ReplaceField$Value")


# ---------------------------------------------------------------------------------------
# MaskField
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _NonEmptyIfSet(Validator):
    """Null, or a string that is not empty."""

    def __call__(self, name: str, value: Any) -> None:
        if value is not None and not value:
            raise ValueError("String must be non-empty")

    def __str__(self) -> str:
        return "non-empty string"


#: Connect's "null value" of each type: what a field is masked with when there is no replacement.
_EMPTY: dict[type, Any] = {bool: False, int: 0, float: 0.0, str: "", list: [], dict: {}}


class _MaskField(_FieldTransform):
    """Replaces fields with the empty value of their type, or with ``replacement`` (Connect's MaskField)."""

    config_def = ConfigDef([
        ConfigKey("fields", Type.LIST, importance=Importance.HIGH, validator=NonEmptyList(),
                  doc="Names of fields to mask."),
        ConfigKey("replacement", Type.STRING, default=None, importance=Importance.LOW, validator=_NonEmptyIfSet(),
                  doc="Custom value replacement, that will be applied to all 'fields' values (numeric or non-empty "
                      "string values only)."),
        _REPLACE_NULL,
    ])

    def configure(self, config: Config) -> None:
        """Keep the fields and the replacement."""
        self.fields = list(config["fields"])
        self.replacement = config["replacement"]

    def change(self, record: SourceRecord, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` with each configured field that is present masked (a null stays null)."""
        for name in self.fields:
            value = data.get(name)
            if value is not None:
                data[name] = self._masked(name, value)
        return data

    def _masked(self, name: str, value: Any) -> Any:
        if self.replacement is None:
            return type(_EMPTY[type(value)])(_EMPTY[type(value)])  # a new [] / {} each time
        if isinstance(value, bool) or isinstance(value, (list, dict)):
            raise DataError(f"Cannot mask field {name!r} of type {type(value).__name__} with custom replacement")
        if isinstance(value, str):
            return self.replacement
        try:
            return type(value)(self.replacement)
        except ValueError:
            raise DataError(f"Unable to convert {self.replacement} ({type(value).__name__}) to number for "
                            f"field {name!r}") from None


class MaskFieldKey(_MaskField):
    """MaskField on the record key (``MaskField$Key``)."""

    part = "key"
    aliases = (f"{JAVA_PACKAGE}.MaskField$Key", "MaskField$Key")


class MaskFieldValue(_MaskField):
    """MaskField on the record value (``MaskField$Value``)."""

    part = "value"
    aliases = (f"{JAVA_PACKAGE}.MaskField$Value", "MaskField$Value")
