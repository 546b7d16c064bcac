"""Connect data <-> JSON trees, with or without a schema: the heart of ``JsonConverter``.

Schemas are dicts in Connect's JSON schema form (see :mod:`mirrorline.api.converters`).
:func:`normalise` puts a schema's keys in the order Connect's ``JsonConverter.asJsonSchema``
writes them (``type``, its ``items``/``keys``/``values``/``fields``, ``optional``, ``name``,
``version``, ``doc``, ``parameters``, ``default``; a struct field's ``field`` last), so the
envelope bytes are Connect's. :func:`to_json` is ``convertToJson`` and :func:`to_connect`
``convertToConnect``, including the logical types Decimal, Date, Time and Timestamp.
"""

from __future__ import annotations

import base64
import datetime
import decimal
from typing import Any

from mirrorline.api.errors import DataError

INT_RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
PRIMITIVES = {*INT_RANGES, "float32", "float64", "boolean", "string", "bytes"}
TYPES = {*PRIMITIVES, "array", "map", "struct"}

DECIMAL = "org.apache.kafka.connect.data.Decimal"
DATE = "org.apache.kafka.connect.data.Date"
TIME = "org.apache.kafka.connect.data.Time"
TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MS_PER_DAY = 86_400_000


def normalise(schema: Any) -> dict[str, Any] | None:
    """``schema`` checked and with its keys in Connect's order; DataError if it is not a schema."""
    if schema is None:
        return None
    if not isinstance(schema, dict):
        raise DataError(f"Schema must be a JSON object, not {type(schema).__name__}")
    type_ = schema.get("type")
    if type_ is None:
        raise DataError("Schema must contain 'type' field")
    if type_ not in TYPES:
        raise DataError(f"Unknown schema type: {type_}")
    out: dict[str, Any] = {"type": type_}
    if type_ == "array":
        if "items" not in schema:
            raise DataError("Array schema did not specify the element type")
        out["items"] = normalise(schema["items"])
    elif type_ == "map":
        if "keys" not in schema or "values" not in schema:
            raise DataError("Map schema did not specify the key and value types")
        out["keys"] = normalise(schema["keys"])
        out["values"] = normalise(schema["values"])
    elif type_ == "struct":
        fields = schema.get("fields")
        if not isinstance(fields, list):
            raise DataError("Struct schema's \"fields\" argument is not an array.")
        out["fields"] = []
        for field in fields:
            if not isinstance(field, dict) or not isinstance(field.get("field"), str):
                raise DataError("Struct schema's field name not specified properly")
            out["fields"].append({**normalise({k: v for k, v in field.items() if k != "field"}),
                                  "field": field["field"]})
    out["optional"] = bool(schema.get("optional", False))
    for key in ("name", "version", "doc", "parameters", "default"):
        if schema.get(key) is not None:
            out[key] = schema[key]
    return out


def to_json(schema: dict[str, Any] | None, value: Any) -> Any:
    """``value`` as a JSON tree (``convertToJson``); DataError when it does not fit ``schema``."""
    if value is None:
        if schema is None or schema.get("optional"):
            return None
        if schema.get("default") is not None:
            return schema["default"]
        raise DataError("Conversion error: null value for field that is required and has no default value")
    if schema is None:
        return _schemaless_json(value)
    type_, name = schema["type"], schema.get("name")
    if name == DECIMAL and isinstance(value, decimal.Decimal):
        return _decimal_json(schema, value)
    if name == TIMESTAMP and isinstance(value, datetime.datetime):
        when = value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)
        return (when - _EPOCH) // datetime.timedelta(milliseconds=1)
    if name == DATE and isinstance(value, datetime.date):
        return (value - _EPOCH.date()).days
    if name == TIME and isinstance(value, datetime.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    if type_ in INT_RANGES:
        bits = INT_RANGES[type_]
        if isinstance(value, bool) or not isinstance(value, int) or not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            raise _mismatch(schema, value)
        return value
    if type_ in ("float32", "float64"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _mismatch(schema, value)
        return float(value)
    if type_ == "boolean":
        if not isinstance(value, bool):
            raise _mismatch(schema, value)
        return value
    if type_ == "string":
        if not isinstance(value, str):
            raise _mismatch(schema, value)
        return value
    if type_ == "bytes":
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise _mismatch(schema, value)
        return base64.b64encode(bytes(value)).decode("ascii")
    if type_ == "array":
        if not isinstance(value, (list, tuple)):
            raise _mismatch(schema, value)
        return [to_json(schema["items"], v) for v in value]
    if type_ == "map":
        if not isinstance(value, dict):
            raise _mismatch(schema, value)
        if schema["keys"]["type"] == "string":
            return {k: to_json(schema["values"], v) for k, v in value.items()}
        return [[to_json(schema["keys"], k), to_json(schema["values"], v)] for k, v in value.items()]
    if type_ == "struct":
        if not isinstance(value, dict):
            raise _mismatch(schema, value)
        return {f["field"]: _field_json(f, value) for f in schema["fields"]}
    raise DataError(f"Unknown schema type: {type_}")  # pragma: no cover - normalise() rules it out


def _field_json(field: dict[str, Any], struct: dict[str, Any]) -> Any:
    try:
        return to_json(field, struct.get(field["field"]))
    except DataError as exc:
        raise DataError(f"Field {field['field']}: {exc}") from None


def _mismatch(schema: dict[str, Any], value: Any) -> DataError:
    return DataError(f"Invalid type for {schema['type'].upper()}: {type(value).__name__}")


def _schemaless_json(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_schemaless_json(v) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: _schemaless_json(v) for k, v in value.items()}
        return [[_schemaless_json(k), _schemaless_json(v)] for k, v in value.items()]
    raise DataError(f"Couldn't convert {type(value).__name__} to JSON.")


def _decimal_json(schema: dict[str, Any], value: decimal.Decimal) -> Any:
    scale = int((schema.get("parameters") or {}).get("scale", 0))
    unscaled = int(value.scaleb(scale).to_integral_value())
    length = max(1, (unscaled.bit_length() + 8) // 8)
    return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode("ascii")


def to_connect(schema: dict[str, Any] | None, value: Any) -> Any:
    """The data a JSON tree means under ``schema`` (``convertToConnect``); DataError on a mismatch."""
    if schema is None:
        return value
    if value is None:
        if schema.get("default") is not None:
            return to_connect(schema, schema["default"])
        if schema.get("optional"):
            return None
        raise DataError(f"Invalid null value for required {schema['type'].upper()} field")
    type_, name = schema["type"], schema.get("name")
    if type_ in INT_RANGES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _mismatch(schema, value)
        return _logical(name, value)
    if type_ in ("float32", "float64"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _mismatch(schema, value)
        return float(value)
    if type_ == "boolean":
        if not isinstance(value, bool):
            raise _mismatch(schema, value)
        return value
    if type_ == "string":
        if not isinstance(value, str):
            raise _mismatch(schema, value)
        return value
    if type_ == "bytes":
        if name == DECIMAL and isinstance(value, (int, float)):
            return decimal.Decimal(str(value))
        if not isinstance(value, str):
            raise _mismatch(schema, value)
        try:
            data = base64.b64decode(value, validate=True)
        except ValueError as exc:
            raise DataError(f"Invalid bytes field: {exc}") from None
        if name == DECIMAL:
            scale = int((schema.get("parameters") or {}).get("scale", 0))
            return decimal.Decimal(int.from_bytes(data, "big", signed=True)).scaleb(-scale)
        return data
    if type_ == "array":
        if not isinstance(value, list):
            raise _mismatch(schema, value)
        return [to_connect(schema["items"], v) for v in value]
    if type_ == "map":
        if schema["keys"]["type"] == "string":
            if not isinstance(value, dict):
                raise _mismatch(schema, value)
            return {k: to_connect(schema["values"], v) for k, v in value.items()}
        if not isinstance(value, list) or not all(isinstance(e, list) and len(e) == 2 for e in value):
            raise DataError("Maps with non-string fields should be encoded as JSON array of tuples, but found "
                            f"{type(value).__name__}")
        return {_hashable(to_connect(schema["keys"], k)): to_connect(schema["values"], v) for k, v in value}
    if type_ == "struct":
        if not isinstance(value, dict):
            raise DataError(f"Structs should be encoded as JSON objects, but found {type(value).__name__}")
        return {f["field"]: to_connect(f, value.get(f["field"])) for f in schema["fields"]}
    raise DataError(f"Unknown schema type: {type_}")  # pragma: no cover


def _logical(name: str | None, value: int) -> Any:
    if name == TIMESTAMP:
        return _EPOCH + datetime.timedelta(milliseconds=value)
    if name == DATE:
        return _EPOCH.date() + datetime.timedelta(days=value)
    if name == TIME:
        return (datetime.datetime.min + datetime.timedelta(milliseconds=value)).time()
    return value


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in value.items())
    return value
