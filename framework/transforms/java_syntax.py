"""Connect configs are written for Java: regexes, ``$1`` replacements and SimpleDateFormat patterns.

The built-in transforms accept what their Java originals accept, translated once at
configure time into Python's ``re`` and a small date formatter, so the per-record work is
plain Python. Translated: named groups ``(?<name>...)`` and back-references ``\\k<name>``;
replacement references ``$1``, ``${name}`` and ``\\$``; the common SimpleDateFormat letters.
Anything else keeps Python's ``re`` meaning (the two agree on everyday patterns).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mirrorline.api.config import Validator

_NAMED_GROUP = re.compile(r"\(\?<(?![=!])")
_NAMED_BACKREF = re.compile(r"\\k<(\w+)>")


def java_regex(pattern: str) -> re.Pattern[str]:
    """Compile a Java regular expression with Python's ``re``; ``re.error`` if it is invalid."""
    return re.compile(_NAMED_BACKREF.sub(r"(?P=\1)", _NAMED_GROUP.sub("(?P<", pattern)))


@dataclass(frozen=True)
class JavaRegex(Validator):
    """A valid regular expression (Java syntax, as Connect's ``regex``/``pattern`` settings)."""

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        try:
            java_regex(value)
        except re.error as exc:
            raise ValueError(f"invalid regular expression: {exc}") from None

    def __str__(self) -> str:
        return "valid regex"


class JavaReplacement:
    """A ``Matcher.replaceFirst`` replacement: ``$n`` and ``${name}`` insert groups, ``\\x`` is ``x``."""

    def __init__(self, text: str, pattern: re.Pattern[str]):
        self.parts: list[str | tuple[int | str]] = []  # literal text, or (group number or name,)
        literal, i = [], 0
        while i < len(text):
            char = text[i]
            if char == "\\":
                if i + 1 == len(text):
                    raise ValueError("character to be escaped is missing at the end of the replacement")
                literal.append(text[i + 1])
                i += 2
            elif char == "$":
                group, i = self._group(text, i + 1, pattern)
                self.parts += ["".join(literal), (group,)]
                literal = []
            else:
                literal.append(char)
                i += 1
        self.parts.append("".join(literal))

    @staticmethod
    def _group(text: str, i: int, pattern: re.Pattern[str]) -> tuple[int | str, int]:
        if text.startswith("{", i):
            end = text.find("}", i)
            name = text[i + 1:end] if end > 0 else ""
            if not name or name not in pattern.groupindex:
                raise ValueError(f"no group named {name!r} in the regex")
            return name, end + 1
        if i == len(text) or not text[i].isdigit():
            raise ValueError("illegal group reference: '$' must be followed by a group number or {name}; "
                             "write \\$ for a literal dollar")
        number, i = int(text[i]), i + 1
        while i < len(text) and text[i].isdigit() and number * 10 + int(text[i]) <= pattern.groups:
            number, i = number * 10 + int(text[i]), i + 1  # Java takes more digits while the group exists
        if number > pattern.groups:
            raise ValueError(f"no group {number} in the regex (it has {pattern.groups})")
        return number, i

    def expand(self, match: re.Match[str]) -> str:
        """The replacement text for ``match``."""
        return "".join(p if isinstance(p, str) else (match.group(p[0]) or "") for p in self.parts)


# ---------------------------------------------------------------------------------------
# SimpleDateFormat, the letters Connect users put in timestamp.format
# ---------------------------------------------------------------------------------------

def _pad(value: int, width: int) -> str:
    return str(value).zfill(width)


_FIELDS: dict[str, Callable[[datetime, int], str]] = {
    "y": lambda t, n: _pad(t.year % 100, 2) if n == 2 else _pad(t.year, n),
    "M": lambda t, n: (calendar.month_name[t.month] if n >= 4 else calendar.month_abbr[t.month]) if n >= 3
    else _pad(t.month, n),
    "d": lambda t, n: _pad(t.day, n),
    "D": lambda t, n: _pad(t.timetuple().tm_yday, n),
    "H": lambda t, n: _pad(t.hour, n),
    "k": lambda t, n: _pad(t.hour or 24, n),
    "h": lambda t, n: _pad(t.hour % 12 or 12, n),
    "K": lambda t, n: _pad(t.hour % 12, n),
    "m": lambda t, n: _pad(t.minute, n),
    "s": lambda t, n: _pad(t.second, n),
    "S": lambda t, n: _pad(t.microsecond // 1000, n),
    "E": lambda t, n: calendar.day_name[t.weekday()] if n >= 4 else calendar.day_abbr[t.weekday()],
    "a": lambda t, n: "AM" if t.hour < 12 else "PM",
    "Z": lambda t, n: "+0000",
    "X": lambda t, n: "Z",
}


class JavaDateFormat:
    """A SimpleDateFormat pattern (UTC, as Connect's TimestampRouter formats), parsed once."""

    def __init__(self, pattern: str):
        self.parts: list[str | tuple[str, int]] = []
        i = 0
        while i < len(pattern):
            char = pattern[i]
            if char == "'":
                end = pattern.find("'", i + 1)
                if end < 0:
                    raise ValueError(f"unterminated quote in date format {pattern!r}")
                self.parts.append(pattern[i + 1:end] if end > i + 1 else "'")
                i = end + 1
            elif char.isascii() and char.isalpha():
                run = len(pattern[i:]) - len(pattern[i:].lstrip(char))
                if char not in _FIELDS:
                    raise ValueError(f"unsupported pattern letter {char!r} in date format {pattern!r} "
                                     f"(supported: {''.join(_FIELDS)})")
                self.parts.append((char, run))
                i += run
            else:
                self.parts.append(char)
                i += 1

    def format(self, epoch_ms: int) -> str:
        """The pattern applied to ``epoch_ms`` (milliseconds since the epoch), in UTC."""
        moment = datetime.fromtimestamp(epoch_ms / 1000, UTC)
        return "".join(p if isinstance(p, str) else _FIELDS[p[0]](moment, p[1]) for p in self.parts)


@dataclass(frozen=True)
class DateFormatValidator(Validator):
    """A SimpleDateFormat pattern made of the supported letters."""

    def __call__(self, name: str, value: Any) -> None:
        if value is not None:
            JavaDateFormat(value)

    def __str__(self) -> str:
        return "SimpleDateFormat pattern (letters " + "".join(_FIELDS) + ")"
