"""Kafka's flexible-version wire types (KIP-482) read and written by hand, for the hot answers.

aiokafka reads and writes every request and response with its schema walker: one Python call
per field and a tuple per struct. For the few messages an idle mirror sends over and over with
thousands of entries (Metadata v12, OffsetFetch v8) that walk was a large part of its CPU, so
:mod:`.metadata_v12` and :mod:`.group_offsets` read those with :class:`FlexibleReader` (a
position in the bytes, unsigned varints, compact strings and arrays, tagged fields skipped) and
write them with :func:`uvarint` and :func:`compact_string`.
"""

from __future__ import annotations

import struct

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class FlexibleReader:
    """A position in a message's bytes, read forward. Reading past the end raises ``IndexError``
    or ``struct.error``: callers turn either into a ``ValueError`` naming the message."""

    __slots__ = ("data", "pos")

    def __init__(self, data, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def uvarint(self) -> int:
        """An unsigned varint (a compact length, a tag count)."""
        data, pos = self.data, self.pos
        byte = data[pos]
        pos += 1
        value = byte & 0x7F
        shift = 7
        while byte & 0x80:
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
        self.pos = pos
        return value

    def int16(self) -> int:
        """A big-endian INT16."""
        value = _INT16.unpack_from(self.data, self.pos)[0]
        self.pos += 2
        return value

    def int32(self) -> int:
        """A big-endian INT32."""
        value = _INT32.unpack_from(self.data, self.pos)[0]
        self.pos += 4
        return value

    def compact_string(self) -> str | None:
        """A COMPACT_NULLABLE_STRING (UTF-8)."""
        length = self.uvarint() - 1
        if length < 0:
            return None
        start = self.pos
        end = start + length
        if end > len(self.data):
            raise IndexError(f"a string of {length} bytes runs past the end")
        self.pos = end
        return bytes(self.data[start:end]).decode("utf-8")

    def skip_tags(self) -> dict:
        """Step over a tagged-fields section; returns ``{}`` (what aiokafka shows for none)."""
        for _ in range(self.uvarint()):
            self.uvarint()  # the tag
            size = self.uvarint()  # read before adding: `self.pos += self.uvarint()` loses the size's bytes
            self.pos += size
        return {}


def uvarint(value: int) -> bytes:
    """``value`` (>= 0) as an unsigned varint."""
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def compact_string(value: str | None) -> bytes:
    """``value`` as a COMPACT_NULLABLE_STRING."""
    if value is None:
        return b"\x00"
    raw = value.encode("utf-8")
    return uvarint(len(raw) + 1) + raw
