"""``PiiMask``: hash or redact named fields of JSON-object record values.

Hashing is keyed (HMAC-SHA256 with ``hash.key``), so one value always masks to the same token
and records can still be joined or counted by it downstream, while nobody without the key can
test a guess ("is this alice@example.com?") against a token, as they could with a plain hash.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from typing import Any

from mirrorline.api import (
    Config,
    ConfigDef,
    ConfigError,
    ConfigKey,
    DataError,
    Importance,
    OneOf,
    SourceRecord,
    Transformation,
    Type,
    Validator,
)


class NonEmptyList(Validator):
    """At least one element."""

    def __call__(self, name: str, value: Any) -> None:
        if not value:
            raise ValueError("must list at least one field")

    def __str__(self) -> str:
        return "non-empty list"


class PiiMask(Transformation):
    """Masks personal data in JSON-object record values: each field in ``fields`` is replaced by
    a keyed-hash token (``mode=hash``) or by a fixed text (``mode=redact``)."""

    aliases = ("com.example.PiiMask",)
    config_def = ConfigDef([
        ConfigKey("fields", Type.LIST, importance=Importance.HIGH, validator=NonEmptyList(), group="PII",
                  doc="Fields to mask; a dotted path (customer.email) reaches into nested objects. A field a "
                      "record does not have is left alone."),
        ConfigKey("mode", Type.STRING, default="hash", importance=Importance.HIGH,
                  validator=OneOf(("hash", "redact")), group="PII",
                  doc="hash: replace each value by hash.prefix + hex HMAC-SHA256 of its JSON text under "
                      "hash.key (equal values give equal tokens); redact: replace it by the redaction text."),
        ConfigKey("hash.key", Type.PASSWORD, default=None, importance=Importance.HIGH, group="PII",
                  doc="Secret key of the HMAC (required with mode=hash). Changing it changes every token."),
        ConfigKey("hash.prefix", Type.STRING, default="pii:", importance=Importance.LOW, group="PII",
                  doc="Text put before each token, so masked values are recognisable."),
        ConfigKey("redaction", Type.STRING, default="[redacted]", importance=Importance.LOW, group="PII",
                  doc="The text that replaces each value with mode=redact."),
    ])

    def version(self) -> str:
        """This plugin's version."""
        return "0.1.0"

    def configure(self, config: Config) -> None:
        """Read the settings; ConfigError when ``mode=hash`` has no ``hash.key``."""
        self.paths = [field.split(".") for field in config["fields"]]
        self.mode = config["mode"]
        key = config["hash.key"]
        if self.mode == "hash" and (key is None or not key.value):
            raise ConfigError("hash.key is required with mode=hash: set a secret key (or use mode=redact)")
        self.key = key.value.encode() if key is not None else b""
        self.prefix = config["hash.prefix"]
        self.redaction = config["redaction"]

    def token(self, value: Any) -> str:
        """The mask of one value: its keyed hash (or the redaction text)."""
        if self.mode == "redact":
            return self.redaction
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return self.prefix + hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        """The record with its value's PII fields masked; a tombstone passes unchanged."""
        if record.value is None:
            return record
        try:
            data = json.loads(record.value)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise DataError("PiiMask needs JSON-object values; this value is not one")
        changed = False
        for path in self.paths:
            parent = data
            for step in path[:-1]:
                parent = parent.get(step) if isinstance(parent, dict) else None
            if isinstance(parent, dict) and parent.get(path[-1]) is not None:
                parent[path[-1]] = self.token(parent[path[-1]])
                changed = True
        if not changed:
            return record
        return dataclasses.replace(record, value=json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode())
