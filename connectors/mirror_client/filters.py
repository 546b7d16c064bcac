"""Topic and consumer-group selection, as MM2's ``DefaultTopicFilter`` / ``DefaultGroupFilter``.

Each filter has an include list and an exclude list of regular expressions. A list is parsed
like a Kafka ``LIST`` config (:func:`parse_config_list`), its elements are joined with ``|`` into
one pattern, and a name is selected when it **fully** matches the include pattern and does not
fully match the exclude pattern. An empty list matches nothing (so ``topics=`` selects no topic).

Patterns are written for Java's ``java.util.regex`` but run on Python's :mod:`re`
(``re.fullmatch`` with ``re.ASCII``, which makes ``\\d``, ``\\w``, ``\\s``, ``\\b`` and ``(?i)``
ASCII-only as in Java). Java-only syntax is rejected or means something else in Python:
``\\p{Alpha}``-style classes, ``\\Q...\\E`` quoting, class intersections ``[a-z&&[^e]]``,
``(?<name>...)`` groups (Python spells it ``(?P<name>...)``), ``\\h``/``\\R``/``\\z``, and a
global inline flag such as ``(?i)`` anywhere but at the very start of the joined pattern
(so ``topics = a, (?i)b`` is valid in Java but rejected here). Also ``.``
excludes only ``\\n`` in Python but all Java line terminators in Java. The default patterns and
ordinary topic/group patterns behave identically in both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "TopicFilter",
    "GroupFilter",
    "parse_config_list",
    "compile_pattern_list",
    "TOPICS_INCLUDE_CONFIG",
    "TOPICS_INCLUDE_DEFAULT",
    "TOPICS_EXCLUDE_CONFIG",
    "TOPICS_EXCLUDE_DEFAULT",
    "GROUPS_INCLUDE_CONFIG",
    "GROUPS_INCLUDE_DEFAULT",
    "GROUPS_EXCLUDE_CONFIG",
    "GROUPS_EXCLUDE_DEFAULT",
]

TOPICS_INCLUDE_CONFIG = "topics"
TOPICS_INCLUDE_DEFAULT = ".*"
TOPICS_EXCLUDE_CONFIG = "topics.exclude"
TOPICS_EXCLUDE_DEFAULT = r".*[\-\.]internal, .*\.replica, __.*"
GROUPS_INCLUDE_CONFIG = "groups"
GROUPS_INCLUDE_DEFAULT = ".*"
GROUPS_EXCLUDE_CONFIG = "groups.exclude"
GROUPS_EXCLUDE_DEFAULT = "console-consumer-.*, connect-.*, __.*"

# Java's \s is exactly [ \t\n\x0B\f\r]; Python's str \s would also match Unicode spaces.
_COMMA_WITH_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")
_MATCH_NOTHING = re.compile(r"(?!)")


def _java_trim(text: str) -> str:
    """Java ``String.trim()``: strip characters up to U+0020 from both ends."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def parse_config_list(value: str | list[str] | tuple[str, ...]) -> list[str]:
    """Parse a Kafka ``LIST`` config value: trim; empty -> ``[]``; else split on ``\\s*,\\s*``
    keeping empty elements. A list/tuple is taken as already parsed."""
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    trimmed = _java_trim(str(value))
    if not trimmed:
        return []
    return _COMMA_WITH_WHITESPACE.split(trimmed)


def compile_pattern_list(config_key: str, patterns: list[str]) -> re.Pattern[str]:
    """Join ``patterns`` with ``|`` into one regex (empty list -> a pattern matching nothing).

    Raises ValueError naming ``config_key`` and the offending pattern(s) if it does not compile.
    """
    if not patterns:
        return _MATCH_NOTHING
    joined = "|".join(patterns)
    try:
        return re.compile(joined, re.ASCII)
    except re.error as exc:
        bad = [p for p in patterns if not _compiles(p)] or [joined]
        raise ValueError(
            f"Invalid regular expression in {config_key!r}: "
            + ", ".join(repr(p) for p in bad)
            + f" ({exc})"
        ) from exc


def _compiles(pattern: str) -> bool:
    try:
        re.compile(pattern, re.ASCII)
    except re.error:
        return False
    return True


#: How many names a filter remembers its decision for before it starts over.
_DECISIONS_KEPT = 100_000


class _IncludeExcludeFilter:
    """Shared include/exclude logic; subclasses name the two config keys and their defaults."""

    _include_key: str
    _include_default: str
    _exclude_key: str
    _exclude_default: str

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.configure(config or {})

    def configure(self, config: Mapping[str, Any]) -> None:
        """(Re)compile the include and exclude patterns from ``config``; absent or None keys take
        their defaults and other keys are ignored."""
        include = config.get(self._include_key)
        exclude = config.get(self._exclude_key)
        self.include_patterns = parse_config_list(self._include_default if include is None else include)
        self.exclude_patterns = parse_config_list(self._exclude_default if exclude is None else exclude)
        self._include = compile_pattern_list(self._include_key, self.include_patterns)
        self._exclude = compile_pattern_list(self._exclude_key, self.exclude_patterns)
        self._decided: dict[str, bool] = {}

    def _accepts(self, name: str) -> bool:
        # Remembered per name: a checkpoint cycle asks once per group and partition (500 groups
        # over 8,000 partitions: millions of regex matches a minute otherwise).
        decided = self._decided.get(name)
        if decided is None:
            if len(self._decided) >= _DECISIONS_KEPT:
                self._decided.clear()
            decided = self._decided[name] = (self._include.fullmatch(name) is not None
                                             and self._exclude.fullmatch(name) is None)
        return decided


class TopicFilter(_IncludeExcludeFilter):
    """MM2's DefaultTopicFilter: ``topics`` (default ``.*``) minus ``topics.exclude``
    (default ``.*[\\-\\.]internal, .*\\.replica, __.*``)."""

    _include_key = TOPICS_INCLUDE_CONFIG
    _include_default = TOPICS_INCLUDE_DEFAULT
    _exclude_key = TOPICS_EXCLUDE_CONFIG
    _exclude_default = TOPICS_EXCLUDE_DEFAULT

    def should_replicate_topic(self, topic: str) -> bool:
        """True if ``topic`` fully matches an include pattern and no exclude pattern."""
        return self._accepts(topic)


class GroupFilter(_IncludeExcludeFilter):
    """MM2's DefaultGroupFilter: ``groups`` (default ``.*``) minus ``groups.exclude``
    (default ``console-consumer-.*, connect-.*, __.*``)."""

    _include_key = GROUPS_INCLUDE_CONFIG
    _include_default = GROUPS_INCLUDE_DEFAULT
    _exclude_key = GROUPS_EXCLUDE_CONFIG
    _exclude_default = GROUPS_EXCLUDE_DEFAULT

    def should_replicate_group(self, group: str) -> bool:
        """True if ``group`` fully matches an include pattern and no exclude pattern."""
        return self._accepts(group)
