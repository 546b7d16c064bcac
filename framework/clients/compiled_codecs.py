"""Fetch and Produce messages encoded and decoded by functions compiled from their schemas.

aiokafka encodes and decodes a message by walking its schema at run time: per field a method
call, a ``struct`` call wrapped in a helper and a ``BytesIO.read``, and per array a generator. A
mirror at a trickle does little else per fetch-and-produce round trip than run these for the
Fetch and Produce messages and their headers: profiled at 1 MB/s with a 10-ms gather, about
650 of the round trip's 1,950 Python calls were that walk (docs/performance.md).

:func:`compile_decoder` and :func:`compile_encoder` turn a schema into one straight Python
function each: the consecutive fixed-width fields are one ``struct`` call, strings and bytes are
sliced from the frame, and arrays are loops in the same function. They give exactly what
aiokafka's walk gives (tuples for structures, lists for arrays, None for a null string, bytes or
array; ``ValueError`` for a truncated frame or a value that does not fit its field); the unit
tests compare the two on generated messages of every version. A schema with a type they do not
know (the compact and tagged types of flexible versions) is refused with ``TypeError``.

:func:`install` puts them in place of ``encode`` on the request classes and ``decode`` on the
response classes of :data:`HOT_MESSAGES` (every non-flexible version of Fetch and Produce, the
request header v1 and the response header v0: aiokafka 0.14 speaks no flexible version of
either). It is called with mirrorline's other process-wide aiokafka changes
(:mod:`.process_patches`), skips a class whose ``encode``/``decode`` is not the generic one it
replaces, and is idempotent.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Any

from aiokafka.protocol import fetch, produce
from aiokafka.protocol.api import RequestHeader_v1, RequestStruct, ResponseHeader_v0
from aiokafka.protocol.struct import Struct
from aiokafka.protocol.types import (
    Array,
    Boolean,
    Bytes,
    Float64,
    Int8,
    Int16,
    Int32,
    Int64,
    Schema,
    String,
    UInt32,
)

__all__ = ["HOT_MESSAGES", "compile_decoder", "compile_encoder", "install", "is_installed"]

#: the fixed-width types and their ``struct`` format characters
_FIXED: dict[Any, str] = {Int8: "b", Int16: "h", Int32: "i", Int64: "q", UInt32: "I", Float64: "d", Boolean: "?"}
_MARKER = "_mirrorline_compiled"


def _versions(module, prefix: str) -> list[type[Struct]]:
    classes = [getattr(module, name) for name in dir(module) if name.startswith(prefix)]
    return sorted((c for c in classes if isinstance(c, type) and issubclass(c, Struct)), key=lambda c: c.__name__)


#: the messages :func:`install` compiles: requests get a compiled ``encode``, responses a compiled ``decode``
HOT_MESSAGES: tuple[type[Struct], ...] = (
    *_versions(fetch, "FetchRequest_v"), *_versions(fetch, "FetchResponse_v"),
    *_versions(produce, "ProduceRequest_v"), *_versions(produce, "ProduceResponse_v"),
    RequestHeader_v1, ResponseHeader_v0,
)


class _Code:
    """The source of one generated function, with the constants it refers to by name."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.constants: dict[str, Any] = {"_struct_error": struct.error}
        self._count = 0

    def name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def constant(self, value: Any, prefix: str) -> str:
        name = self.name(prefix)
        self.constants[name] = value
        return name

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def build(self, name: str, signature: str) -> Callable:
        """The function ``name(signature)`` whose body is what was emitted, struct errors as ValueError."""
        source = [f"def {name}({signature}):", "    try:", *self.lines,
                  "    except _struct_error as error:",
                  f"        raise ValueError(f'{name}: {{error}}') from error"]
        namespace = dict(self.constants)
        exec(compile("\n".join(source), f"<compiled {name}>", "exec"), namespace)  # noqa: S102 - our own text
        return namespace[name]


def _fields_of(schema_or_type) -> tuple[Sequence, bool]:
    """The fields to walk and whether they make a tuple (a schema) or a single value (a type)."""
    if isinstance(schema_or_type, Schema):
        return schema_or_type.fields, True
    return (schema_or_type,), False


def _check_supported(field) -> None:
    if field in _FIXED or field is Bytes or isinstance(field, String):
        return
    if isinstance(field, Schema):
        for inner in field.fields:
            _check_supported(inner)
        return
    if isinstance(field, Array):
        _check_supported(field.array_of)
        return
    raise TypeError(f"no compiled codec for the field type {field!r}")


# -- decoding --------------------------------------------------------------------------------------
def compile_decoder(schema: Schema, name: str = "decode") -> Callable[[bytes, int], tuple[tuple, int]]:
    """A function ``(frame, position) -> (values, position after them)`` that decodes ``schema``
    from ``frame`` (bytes) as aiokafka's ``schema.decode`` does from a BytesIO at ``position``."""
    _check_supported(schema)
    code = _Code()
    code.constants["_unpack_i16"] = struct.Struct(">h").unpack_from
    code.constants["_unpack_i32"] = struct.Struct(">i").unpack_from
    code.emit(2, "end = len(b)")
    values = _decode_fields(code, schema.fields, 2)
    code.emit(2, f"return ({''.join(v + ', ' for v in values)}), p")
    return code.build(name, "b, p")


def _decode_fields(code: _Code, fields: Iterable, depth: int) -> list[str]:
    """Emit the decoding of ``fields`` in order; the names of the variables holding their values."""
    values: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if not run:
            return
        layout = struct.Struct(">" + "".join(run))
        unpack = code.constant(layout.unpack_from, "unpack")
        names = [code.name("v") for _ in run]
        code.emit(depth, f"{', '.join(names)}, = {unpack}(b, p)")
        code.emit(depth, f"p += {layout.size}")
        values.extend(names)
        run.clear()

    for field in fields:
        if field in _FIXED:
            run.append(_FIXED[field])
            continue
        flush()
        value = code.name("v")
        if isinstance(field, String) or field is Bytes:
            length = code.name("n")
            size, what = (2, "string") if isinstance(field, String) else (4, "Bytes")
            code.emit(depth, f"{length}, = _unpack_i{size * 8}(b, p)")
            code.emit(depth, f"p += {size}")
            code.emit(depth, f"if {length} < 0:")
            code.emit(depth + 1, f"{value} = None")
            code.emit(depth, "else:")
            code.emit(depth + 1, f"if p + {length} > end:")
            code.emit(depth + 2, f"raise ValueError('Buffer underrun decoding {what}')")
            if isinstance(field, String):
                code.emit(depth + 1, f"{value} = b[p:p + {length}].decode({field.encoding!r})")
            else:
                code.emit(depth + 1, f"{value} = b[p:p + {length}]")
            code.emit(depth + 1, f"p += {length}")
        elif isinstance(field, Array):
            length = code.name("n")
            code.emit(depth, f"{length}, = _unpack_i32(b, p)")
            code.emit(depth, "p += 4")
            code.emit(depth, f"if {length} == -1:")
            code.emit(depth + 1, f"{value} = None")
            code.emit(depth, "else:")
            code.emit(depth + 1, f"{value} = []")
            code.emit(depth + 1, f"for _ in range({length}):")
            inner, as_tuple = _fields_of(field.array_of)
            items = _decode_fields(code, inner, depth + 2)
            item = f"({''.join(v + ', ' for v in items)})" if as_tuple else items[0]
            code.emit(depth + 2, f"{value}.append({item})")
        else:  # a schema inside a schema: a tuple of its fields
            items = _decode_fields(code, field.fields, depth)
            code.emit(depth, f"{value} = ({''.join(v + ', ' for v in items)})")
        values.append(value)
    flush()
    return values


# -- encoding --------------------------------------------------------------------------------------
def compile_encoder(schema: Schema, name: str = "encode") -> Callable[[Sequence], bytes]:
    """A function ``(values) -> bytes`` that encodes ``values`` (one per field of ``schema``) as
    aiokafka's ``schema.encode`` does."""
    _check_supported(schema)
    code = _Code()
    code.constants.update(_pack_i16=struct.Struct(">h").pack, _pack_i32=struct.Struct(">i").pack,
                          _NULL_I16=struct.pack(">h", -1), _NULL_I32=struct.pack(">i", -1))
    code.emit(2, "parts = []")
    code.emit(2, "put = parts.append")
    code.emit(2, f"if len(values) != {len(schema.fields)}:")
    code.emit(3, "raise ValueError('Item field count does not match Schema')")
    _encode_fields(code, schema.fields, [f"values[{i}]" for i in range(len(schema.fields))], 2)
    code.emit(2, "return b''.join(parts)")
    return code.build(name, "values")


def _encode_fields(code: _Code, fields: Sequence, sources: Sequence[str], depth: int) -> None:
    """Emit the encoding of ``fields`` in order, field i read from the expression ``sources[i]``."""
    run: list[tuple[str, str]] = []

    def flush() -> None:
        if not run:
            return
        layout = struct.Struct(">" + "".join(char for char, _ in run))
        pack = code.constant(layout.pack, "pack")
        code.emit(depth, f"put({pack}({', '.join(source for _, source in run)}))")
        run.clear()

    for field, source in zip(fields, sources, strict=True):
        if field in _FIXED:
            run.append((_FIXED[field], source))
            continue
        flush()
        value = code.name("x")
        code.emit(depth, f"{value} = {source}")
        if isinstance(field, String):
            code.emit(depth, f"if {value} is None:")
            code.emit(depth + 1, "put(_NULL_I16)")
            code.emit(depth, "else:")
            code.emit(depth + 1, f"{value} = str({value}).encode({field.encoding!r})")
            code.emit(depth + 1, f"put(_pack_i16(len({value})))")
            code.emit(depth + 1, f"put({value})")
        elif field is Bytes:
            code.emit(depth, f"if {value} is None:")
            code.emit(depth + 1, "put(_NULL_I32)")
            code.emit(depth, "else:")
            code.emit(depth + 1, f"put(_pack_i32(len({value})))")
            code.emit(depth + 1, f"put({value})")
        elif isinstance(field, Array):
            code.emit(depth, f"if {value} is None:")
            code.emit(depth + 1, "put(_NULL_I32)")
            code.emit(depth, "else:")
            code.emit(depth + 1, f"put(_pack_i32(len({value})))")
            item = code.name("e")
            code.emit(depth + 1, f"for {item} in {value}:")
            inner, as_tuple = _fields_of(field.array_of)
            if as_tuple:
                code.emit(depth + 2, f"if len({item}) != {len(inner)}:")
                code.emit(depth + 3, "raise ValueError('Item field count does not match Schema')")
                _encode_fields(code, inner, [f"{item}[{i}]" for i in range(len(inner))], depth + 2)
            else:
                _encode_fields(code, inner, [item], depth + 2)
        else:  # a schema inside a schema: its value is a sequence of its fields
            code.emit(depth, f"if len({value}) != {len(field.fields)}:")
            code.emit(depth + 1, "raise ValueError('Item field count does not match Schema')")
            _encode_fields(code, field.fields, [f"{value}[{i}]" for i in range(len(field.fields))], depth)
    flush()


# -- installing ------------------------------------------------------------------------------------
def _compiled_decode(cls: type[Struct]):
    decoder = compile_decoder(cls.SCHEMA, f"decode_{cls.__name__}")
    names = cls.SCHEMA.names
    plain_init = cls.__init__ is Struct.__init__

    def decode(klass, data):
        if isinstance(data, bytes):
            values, _ = decoder(data, 0)
        else:  # a BytesIO (the connection's, positioned after the response header): its bytes are not copied
            values, end = decoder(data.getvalue(), data.tell())
            data.seek(end)
        if plain_init and klass is cls:  # what Struct.__init__ does with one value per field, minus its checks
            message = klass.__new__(klass)
            message.__dict__.update(zip(names, values))
            return message
        return klass(*values)

    setattr(decode, _MARKER, True)
    return classmethod(decode)


def _compiled_encode(cls: type[Struct]):
    encoder = compile_encoder(cls.SCHEMA, f"encode_{cls.__name__}")
    names = cls.SCHEMA.names
    values_of = itemgetter(*names) if len(names) > 1 else (lambda fields: (fields[names[0]],))

    def encode(self) -> bytes:
        return encoder(values_of(self.__dict__))

    setattr(encode, _MARKER, True)
    return encode


def _is_request(cls: type[Struct]) -> bool:
    return issubclass(cls, RequestStruct) or cls is RequestHeader_v1


def install(messages: Iterable[type[Struct]] = HOT_MESSAGES) -> list[type[Struct]]:
    """Give ``messages`` compiled codecs (see the module docstring); idempotent. Returns the classes
    changed by this call: a class whose codec is not aiokafka's generic one is left as it is."""
    changed = []
    for cls in messages:
        if is_installed(cls):
            continue
        attribute = "encode" if _is_request(cls) else "decode"
        generic = Struct.__dict__[attribute]
        inherited = getattr(cls, attribute)
        if getattr(inherited, "__func__", inherited) is not getattr(generic, "__func__", generic):
            continue  # aiokafka gives this class a codec of its own: not ours to replace
        try:
            replacement = _compiled_encode(cls) if attribute == "encode" else _compiled_decode(cls)
        except TypeError:
            continue  # a field type the compiler does not know: aiokafka's walk stays
        setattr(cls, attribute, replacement)
        changed.append(cls)
    return changed


def is_installed(cls: type[Struct]) -> bool:
    """Whether ``cls`` encodes (a request) or decodes (a response) with a compiled codec."""
    attribute = "encode" if _is_request(cls) else "decode"
    current = cls.__dict__.get(attribute)
    return bool(getattr(getattr(current, "__func__", current), _MARKER, False))
