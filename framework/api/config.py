"""Config definitions: every setting declared once, and that one declaration drives everything.

A :class:`ConfigKey` holds a setting's name, type, default, importance, documentation,
validator and group. A :class:`ConfigDef` is an ordered collection of keys; it

- parses raw string maps (``.properties`` files, REST JSON) into typed values
  (:meth:`ConfigDef.parse`), raising one :class:`~mirrorline.api.errors.ConfigError` that
  lists *every* problem;
- validates without raising (:meth:`ConfigDef.validate`), which is what
  ``PUT /connector-plugins/{plugin}/config/validate`` returns;
- describes itself for ``GET /connector-plugins/{plugin}/config`` (:meth:`ConfigKey.info`)
  and for the generated docs (:meth:`ConfigDef.to_markdown`).

Types and their Connect names: ``STRING``, ``INT``, ``LONG``, ``DOUBLE``, ``BOOLEAN``,
``LIST`` (comma-separated, split on ``\\s*,\\s*``; an empty string is an empty list),
``CLASS`` (a class name, kept as a string) and ``PASSWORD`` (kept in a :class:`Password`
so it never prints).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from mirrorline.api.errors import ConfigError
from mirrorline.api.secrets import HIDDEN, is_secret, redact, scrub


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


#: The default of a required setting.
NO_DEFAULT: Any = _NoDefault()


class Type(str, Enum):
    """A setting's type, named as Kafka's ``ConfigDef.Type``."""

    STRING = "STRING"
    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    BOOLEAN = "BOOLEAN"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"


class Importance(str, Enum):
    """How much a user should care about a setting (shown in docs and REST)."""

    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


class Password:
    """A secret setting value: ``str()`` and ``repr()`` print ``[hidden]``; ``.value`` is the secret."""

    __slots__ = ("value",)

    def __init__(self, value: str):
        self.value = value

    def __repr__(self) -> str:
        return "[hidden]"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)


def split_list(value: str) -> list[str]:
    """Split a LIST setting as Kafka does: on commas with surrounding blanks; '' is []."""
    value = value.strip()
    return [] if not value else re.split(r"\s*,\s*", value)


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ValueError("expected true or false")


def _parse_int(bits: int) -> Callable[[Any], int]:
    limit = 1 << (bits - 1)

    def parse(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError("expected an integer")
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError("expected an integer")
            value = int(value)
        number = int(str(value).strip()) if not isinstance(value, int) else value
        if not -limit <= number < limit:
            raise ValueError(f"out of range for a {bits}-bit integer")
        return number

    return parse


def _parse_list(value: Any) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value]
    return split_list(str(value))


def _parse_password(value: Any) -> Password:
    return value if isinstance(value, Password) else Password(str(value))


_PARSERS: dict[Type, Callable[[Any], Any]] = {
    Type.STRING: lambda v: str(v).strip(),
    Type.INT: _parse_int(32),
    Type.LONG: _parse_int(64),
    Type.DOUBLE: lambda v: float(str(v).strip()),
    Type.BOOLEAN: _parse_bool,
    Type.LIST: _parse_list,
    Type.CLASS: lambda v: str(v).strip(),
    Type.PASSWORD: _parse_password,
}


def format_value(value: Any, type_: Type) -> str | None:
    """Render a typed value back as Connect shows it in REST (lists comma-joined, secrets hidden)."""
    if value is None or value is NO_DEFAULT:
        return None
    if type_ is Type.PASSWORD:
        return "[hidden]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


# ---------------------------------------------------------------------------------------
# Validators: callables (name, parsed value) -> None that raise ValueError with a message.
# ---------------------------------------------------------------------------------------

class Validator:
    """Checks a parsed value; raises ValueError saying what is wrong. ``str()`` describes the rule."""

    def __call__(self, name: str, value: Any) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def recommended_values(self) -> list[str]:
        """Values a UI may offer for this setting (empty when open-ended)."""
        return []


@dataclass(frozen=True)
class Range(Validator):
    """A number within ``[min, max]`` (either bound may be None)."""

    min: float | None = None
    max: float | None = None

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        if self.min is not None and value < self.min:
            raise ValueError(f"must be at least {self.min}")
        if self.max is not None and value > self.max:
            raise ValueError(f"must be no more than {self.max}")

    def __str__(self) -> str:
        # as Kafka's ConfigDef.Range: [1,...], [...,5], [1,...,5] and [...] when unbounded
        if self.min is None and self.max is None:
            return "[...]"
        if self.min is None:
            return f"[...,{self.max}]"
        if self.max is None:
            return f"[{self.min},...]"
        return f"[{self.min},...,{self.max}]"


@dataclass(frozen=True)
class OneOf(Validator):
    """One of a fixed set of strings (compared case-insensitively when ``ignore_case``)."""

    values: tuple[str, ...]
    ignore_case: bool = False

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        allowed = [v.lower() for v in self.values] if self.ignore_case else list(self.values)
        candidate = value.lower() if self.ignore_case else value
        if candidate not in allowed:
            raise ValueError(f"must be one of {', '.join(self.values)}")

    def recommended_values(self) -> list[str]:
        return list(self.values)

    def __str__(self) -> str:
        return "[" + ", ".join(self.values) + "]"


@dataclass(frozen=True)
class ValidString(Validator):
    """One of a fixed set of strings, with Kafka's own messages (``ConfigDef.ValidString`` and, with
    ``ignore_case``, ``ConfigDef.CaseInsensitiveValidString``): for settings whose errors must read
    exactly as Kafka Connect's."""

    values: tuple[str, ...]
    ignore_case: bool = False

    def __call__(self, name: str, value: Any) -> None:
        if self.ignore_case:
            if value is None or str(value).upper() not in {v.upper() for v in self.values}:
                raise ValueError("String must be one of (case insensitive): "
                                 + ", ".join(v.upper() for v in self.values))
        elif value not in self.values:
            raise ValueError("String must be one of: " + ", ".join(self.values))

    def recommended_values(self) -> list[str]:
        return list(self.values)

    def __str__(self) -> str:
        if self.ignore_case:
            return "(case insensitive) [" + ", ".join(v.upper() for v in self.values) + "]"
        return "[" + ", ".join(self.values) + "]"


@dataclass(frozen=True)
class NonEmptyString(Validator):
    """A string with at least one non-blank character."""

    def __call__(self, name: str, value: Any) -> None:
        if value is None or not str(value).strip():
            raise ValueError("must not be empty")

    def __str__(self) -> str:
        return "non-empty string"


@dataclass(frozen=True)
class RegexList(Validator):
    """A list whose every element is a valid regular expression (Python ``re`` syntax)."""

    def __call__(self, name: str, value: Any) -> None:
        for pattern in value or []:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None

    def __str__(self) -> str:
        return "comma-separated list of regular expressions"


# ---------------------------------------------------------------------------------------
# Keys, values, definitions
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ConfigKey:
    """The single declaration of one setting."""

    name: str
    type: Type
    default: Any = NO_DEFAULT
    importance: Importance = Importance.MEDIUM
    doc: str = ""
    validator: Validator | None = None
    group: str | None = None
    display_name: str | None = None
    order: int = -1
    dependents: tuple[str, ...] = ()

    @property
    def required(self) -> bool:
        """True when the setting has no default and must be given."""
        return self.default is NO_DEFAULT

    def parse(self, raw: Any) -> Any:
        """Turn a raw (usually string) value into this key's type, then validate it; ValueError if bad."""
        value = None if raw is None else _PARSERS[self.type](raw)
        if self.validator is not None:
            self.validator(self.name, value)
        return value

    def default_value(self) -> Any:
        """The parsed default (None when the key is required or defaults to None)."""
        if self.default is NO_DEFAULT or self.default is None:
            return None
        return self.parse(self.default) if isinstance(self.default, str) else self.default

    def info(self) -> dict[str, Any]:
        """This key as Kafka Connect's ConfigKeyInfo JSON (``GET /connector-plugins/{p}/config``)."""
        return {
            "name": self.name,
            "type": self.type.value,
            "required": self.required,
            "default_value": None if self.required else format_value(self.default_value(), self.type),
            "importance": self.importance.value,
            "documentation": self.doc,
            "group": self.group,
            "order": self.order,
            "width": "NONE",
            "display_name": self.display_name or self.name,
            "dependents": list(self.dependents),
        }


@dataclass
class ConfigValue:
    """The outcome of validating one setting: its value, recommended values and errors."""

    name: str
    value: Any = None
    recommended_values: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    visible: bool = True

    def info(self, type_: Type = Type.STRING) -> dict[str, Any]:
        """Connect's ConfigValueInfo JSON."""
        return {
            "name": self.name,
            "value": format_value(self.value, type_),
            "recommended_values": list(self.recommended_values),
            "errors": list(self.errors),
            "visible": self.visible,
        }


class Config(Mapping[str, Any]):
    """Typed values of the declared settings, plus the raw ``originals`` (including undeclared keys)."""

    def __init__(self, values: Mapping[str, Any], originals: Mapping[str, Any]):
        self._values = dict(values)
        self.originals: dict[str, Any] = dict(originals)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def with_prefix(self, prefix: str) -> dict[str, Any]:
        """Raw settings starting with ``prefix``, with the prefix removed (``source.cluster.`` ...)."""
        return {k[len(prefix):]: v for k, v in self.originals.items() if k.startswith(prefix)}

    def __repr__(self) -> str:
        return f"Config({redact(self._values)!r})"


class ConfigDef:
    """An ordered set of ConfigKeys; parses, validates and documents configs."""

    def __init__(self, keys: Iterable[ConfigKey] = ()):
        self._keys: dict[str, ConfigKey] = {}
        for key in keys:
            self.define(key)

    def define(self, key: ConfigKey) -> ConfigDef:
        """Add a key (a later definition of the same name replaces the earlier one)."""
        self._keys[key.name] = key
        return self

    def merged(self, other: ConfigDef) -> ConfigDef:
        """A new ConfigDef with this one's keys followed by ``other``'s (other wins on clashes)."""
        return ConfigDef([*self._keys.values(), *other._keys.values()])

    @property
    def keys(self) -> dict[str, ConfigKey]:
        """Keys by name, in declaration order."""
        return dict(self._keys)

    def groups(self) -> list[str]:
        """The distinct group names in declaration order."""
        seen: list[str] = []
        for key in self._keys.values():
            if key.group and key.group not in seen:
                seen.append(key.group)
        return seen

    def validate(self, raw: Mapping[str, Any]) -> list[ConfigValue]:
        """One ConfigValue per declared key, with every problem found; never raises."""
        results = []
        for key in self._keys.values():
            result = ConfigValue(key.name, recommended_values=(
                key.validator.recommended_values() if key.validator else []))
            if key.name in raw:
                try:
                    result.value = key.parse(raw[key.name])
                except (ValueError, TypeError) as exc:
                    result.value = raw[key.name]
                    reason = str(exc)
                    shown = raw[key.name]
                    if is_secret(key.name, self):  # never echo a secret, not even inside a validator's words
                        reason = scrub(reason, {key.name: shown}, self)
                        shown = HIDDEN
                    result.errors.append(f"Invalid value {shown} for configuration {key.name}: {reason}")
            elif key.required:
                result.errors.append(f"Missing required configuration \"{key.name}\" which has no default value.")
            else:
                try:
                    result.value = key.default_value()
                except (ValueError, TypeError) as exc:  # a broken default is the plugin's bug
                    result.errors.append(f"Invalid default for configuration {key.name}: {exc}")
            results.append(result)
        return results

    def parse(self, raw: Mapping[str, Any]) -> Config:
        """Typed values for every declared key; ConfigError listing every problem if any."""
        values = self.validate(raw)
        errors = [e for v in values for e in v.errors]
        if errors:
            raise ConfigError("; ".join(errors))
        return Config({v.name: v.value for v in values}, raw)

    def to_markdown(self, title: str | None = None) -> str:
        """The settings as a Markdown table: the generated docs."""
        lines = [f"### {title}", ""] if title else []
        lines += ["| Name | Type | Default | Valid values | Importance | Description |",
                  "|---|---|---|---|---|---|"]
        for key in self._keys.values():
            default = "(required)" if key.required else f"`{format_value(key.default_value(), key.type)}`"
            valid = str(key.validator) if key.validator else ""
            doc = key.doc.replace("|", "\\|").replace("\n", " ")
            lines.append(f"| `{key.name}` | {key.type.value} | {default} | {valid} | "
                         f"{key.importance.value.lower()} | {doc} |")
        return "\n".join(lines) + "\n"
