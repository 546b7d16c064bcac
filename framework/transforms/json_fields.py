"""What the ``*Field`` transforms share: the record's key or value read and written as a JSON object.

Records on mirrorline's paths are bytes (there are no converters), so a transform that works
on fields decodes the JSON object, changes a copy, and encodes it again compactly, keeping the
order of the fields. A null key or value (a tombstone) passes through unchanged, as in
Connect; anything that is not a JSON object raises :class:`~mirrorline.api.errors.DataError`,
which the runtime reports with the record's topic, partition and offset.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from mirrorline.api.config import Validator
from mirrorline.api.errors import DataError
from mirrorline.api.records import SourceRecord

Part = Literal["key", "value"]


def decode_object(transform: Any, record: SourceRecord) -> dict[str, Any] | None:
    """The record's ``transform.part`` as a dict (a fresh one, safe to change), or None when null."""
    data = record.key if transform.part == "key" else record.value
    if data is None:
        return None
    try:
        decoded = json.loads(data)
    except (UnicodeDecodeError, ValueError):
        decoded = ...
    if not isinstance(decoded, dict):
        kind = "not JSON" if decoded is ... else f"a JSON {type(decoded).__name__}"
        raise DataError(f"{type(transform).__name__} needs the record {transform.part} to be a JSON object, "
                        f"but it is {kind} ({len(data)} bytes)")
    return decoded


def encode_object(data: dict[str, Any]) -> bytes:
    """A dict as compact JSON bytes (as Connect's JsonConverter writes, without a schema)."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class NonEmptyList(Validator):
    """A list with at least one element (Connect's ``NonEmptyListValidator``)."""

    def __call__(self, name: str, value: Any) -> None:
        if not value:
            raise ValueError("Empty list")

    def __str__(self) -> str:
        return "non-empty list"
