"""Converters: Kafka Connect's ``Converter`` and ``HeaderConverter``, between bytes and data.

A converter sits between Kafka's bytes and the data a task handles:

- on the **source** path, after the transforms and before the producer, ``from_data`` turns
  the key and value a source task returned into the bytes written to Kafka;
- on the **sink** path, after the consumer and before the transforms, ``to_data`` turns the
  consumed bytes into ``(schema, value)`` for the sink task.

A worker or a connector names them with Connect's settings, each with its own prefixed
settings (``value.converter.schemas.enable=false``)::

    key.converter=org.apache.kafka.connect.storage.StringConverter
    value.converter=org.apache.kafka.connect.json.JsonConverter
    value.converter.schemas.enable=false
    header.converter=org.apache.kafka.connect.storage.SimpleHeaderConverter

The default of all three is ``ByteArrayConverter``: bytes in, the same bytes out, and the
runtime then runs no converter code at all (the mirror path). Plugins provide converters
through the ``register_converters`` hook; a name resolves as a transform's ``type`` does
(full name, simple class name, or one of the class's ``aliases``).

Schemas are dicts in Connect's JSON schema form (what ``JsonConverter`` writes in its
envelope): ``{"type": "string", "optional": false}``, ``{"type": "struct", "fields":
[{"type": "int64", "optional": false, "field": "id"}], "optional": false}``. Types:
``int8``, ``int16``, ``int32``, ``int64``, ``float32``, ``float64``, ``boolean``,
``string``, ``bytes``, ``array`` (``items``), ``map`` (``keys``, ``values``) and
``struct`` (``fields``); ``name``, ``version``, ``doc``, ``parameters`` and ``default`` are
optional. Data: a struct is a ``dict`` of field name to value, an array a ``list``, bytes are
``bytes``. :func:`infer_schema` gives the schema of a plain Python value; converters use it
when a source record carries data but no schema (beyond Connect, where a Java source task
always states its schema or none).

Lifecycle, per task and per role (key, value, header): instantiated with no arguments,
``configure(settings, is_key)`` once with the parsed ``<role>.converter.*`` settings, then
``from_data``/``to_data`` per record on the event loop (quick, never blocking), ``close()``
when the task stops. ``configure`` is also called to validate configs: no I/O there.
A record the converter cannot handle raises :class:`~mirrorline.api.errors.DataError`; the
connector's ``errors.tolerance`` then decides whether the task fails or the record is skipped.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from mirrorline.api.config import Config, ConfigDef

__all__ = ["Converter", "HeaderConverter", "Schema", "infer_schema", "schema_of"]

#: A schema in Connect's JSON form (a dict), or None for "no schema".
Schema = dict[str, Any]

_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def schema_of(type_: str, optional: bool = False, **extra: Any) -> Schema:
    """A primitive schema in Connect's JSON form, its keys in Connect's order: ``type``, then
    what the type needs (``items``, ``keys``/``values``, ``fields``), then ``optional``, then the rest."""
    schema: Schema = {"type": type_}
    for key in ("items", "keys", "values", "fields"):
        if key in extra:
            schema[key] = extra.pop(key)
    schema["optional"] = optional
    schema.update(extra)
    return schema


def infer_schema(value: Any, optional: bool = False) -> Schema | None:
    """The schema of a plain Python value, or None when it has none (``None`` itself, an empty
    list, a list of mixed types). ``bool`` is ``boolean``, ``int`` ``int64``, ``float``
    ``float64``, ``str`` ``string``, ``bytes`` ``bytes``, ``list`` an ``array`` of its first
    element's schema, and a ``dict`` with string keys a ``struct`` (a field that is None is an
    optional string). Beyond Connect, which never guesses a schema."""
    if value is None:
        return None
    if isinstance(value, bool):
        return schema_of("boolean", optional)
    if isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            return None
        return schema_of("int64", optional)
    if isinstance(value, float):
        return schema_of("float64", optional)
    if isinstance(value, str):
        return schema_of("string", optional)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return schema_of("bytes", optional)
    if isinstance(value, (list, tuple)):
        items = [infer_schema(v) for v in value if v is not None]
        if not items or any(i != items[0] for i in items):
            return None
        if any(v is None for v in value):
            items[0] = {**items[0], "optional": True}
        return schema_of("array", optional, items=items[0])
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        fields = []
        for name, field_value in value.items():
            field_schema = infer_schema(field_value) if field_value is not None else schema_of("string", True)
            if field_schema is None:
                return None
            fields.append({**field_schema, "field": name})
        return schema_of("struct", optional, fields=fields)
    return None


class Converter(ABC):
    """Turns a record's key or value from data into bytes and back (Connect's ``Converter``).

    Subclass it, declare ``config_def`` (its settings, read as ``key.converter.<name>`` or
    ``value.converter.<name>``), and implement ``from_data`` and ``to_data``.
    """

    #: The converter's settings (after the ``key.converter.`` / ``value.converter.`` prefix).
    config_def: ClassVar[ConfigDef] = ConfigDef()
    #: Other names ``key.converter`` / ``value.converter`` may use (e.g. Connect's Java class name).
    aliases: ClassVar[tuple[str, ...]] = ()
    #: True only for a converter that hands bytes through unchanged both ways (``ByteArrayConverter``):
    #: the runtime then skips it entirely.
    passthrough: ClassVar[bool] = False

    def version(self) -> str:
        """The converter's version string (shown by ``GET /connector-plugins?connectorsOnly=false``)."""
        return "unknown"

    def configure(self, settings: Config, is_key: bool) -> None:
        """Receive the parsed settings (``config_def``) and whether this instance converts keys.
        Called once, before any record. Only check and remember: no I/O."""

    @abstractmethod
    def from_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        """The bytes to write for ``value`` (described by ``schema``, None if unknown) to
        ``topic``; None for a null key or value. DataError if ``value`` cannot be converted."""

    @abstractmethod
    def to_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        """``(schema, value)`` read from the bytes consumed from ``topic``; ``(None, None)`` for
        null. DataError if the bytes are not what this converter reads."""

    def close(self) -> None:
        """Release what ``configure`` acquired; called once when the task stops. Optional."""


class HeaderConverter(ABC):
    """Turns one header value from data into bytes and back (Connect's ``HeaderConverter``).

    Its settings are ``header.converter.<name>``. A class may be both a :class:`Converter`
    and a :class:`HeaderConverter` (the built-in ByteArray, String and JSON converters are).
    """

    config_def: ClassVar[ConfigDef] = ConfigDef()
    aliases: ClassVar[tuple[str, ...]] = ()
    passthrough: ClassVar[bool] = False

    def version(self) -> str:
        """The converter's version string."""
        return "unknown"

    def configure(self, settings: Config, is_key: bool) -> None:
        """Receive the parsed ``header.converter.*`` settings (``is_key`` is always False). No I/O."""

    @abstractmethod
    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        """The bytes to write for header ``header_key`` with ``value``; None for a null header."""

    @abstractmethod
    def to_connect_header(self, topic: str, header_key: str, data: bytes | None) -> tuple[Schema | None, Any]:
        """``(schema, value)`` of the consumed header ``header_key``; ``(None, None)`` for null."""

    def close(self) -> None:
        """Release what ``configure`` acquired. Optional."""
