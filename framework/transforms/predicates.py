"""The built-in predicates: ``TopicNameMatches``, ``HasHeaderKey``, ``RecordIsTombstone``."""

from __future__ import annotations

from mirrorline import __version__
from mirrorline.api.config import Config, ConfigDef, ConfigKey, Importance, NonEmptyString, Type
from mirrorline.api.records import SourceRecord
from mirrorline.api.transforms import Predicate
from mirrorline.transforms.java_syntax import JavaRegex, java_regex

JAVA_PACKAGE = "org.apache.kafka.connect.transforms.predicates"


class BuiltinPredicate(Predicate):
    """Base of the built-in predicates: their version is mirrorline's."""

    def version(self) -> str:
        """mirrorline's version."""
        return __version__


class TopicNameMatches(BuiltinPredicate):
    """True for records whose whole topic name matches ``pattern`` (Connect's TopicNameMatches)."""

    aliases = (f"{JAVA_PACKAGE}.TopicNameMatches",)
    config_def = ConfigDef([
        ConfigKey("pattern", Type.STRING, importance=Importance.MEDIUM, validator=JavaRegex(),
                  doc="A Java regular expression for matching against the name of a record's topic."),
    ])

    def configure(self, config: Config) -> None:
        """Compile the pattern."""
        self.pattern = java_regex(config["pattern"])

    def test(self, record: SourceRecord) -> bool:
        """Whether the record's topic (as it is at this point of the chain) matches."""
        return self.pattern.fullmatch(record.topic) is not None


class HasHeaderKey(BuiltinPredicate):
    """True for records with at least one header of the given name (Connect's HasHeaderKey)."""

    aliases = (f"{JAVA_PACKAGE}.HasHeaderKey",)
    config_def = ConfigDef([
        ConfigKey("name", Type.STRING, importance=Importance.MEDIUM, validator=NonEmptyString(),
                  doc="The header name."),
    ])

    def configure(self, config: Config) -> None:
        """Keep the header name."""
        self.name = config["name"]

    def test(self, record: SourceRecord) -> bool:
        """Whether a header of that name is present."""
        return any(name == self.name for name, _ in record.headers)


class RecordIsTombstone(BuiltinPredicate):
    """True for tombstones, records whose value is null (Connect's RecordIsTombstone)."""

    aliases = (f"{JAVA_PACKAGE}.RecordIsTombstone",)

    def test(self, record: SourceRecord) -> bool:
        """Whether the value is null."""
        return record.value is None
