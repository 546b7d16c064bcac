"""Transforms that decide where a record goes: ``RegexRouter``, ``TimestampRouter``, ``Filter``."""

from __future__ import annotations

import dataclasses

from mirrorline import __version__
from mirrorline.api.config import Config, ConfigDef, ConfigKey, Importance, NonEmptyString, Type
from mirrorline.api.errors import ConfigError, DataError
from mirrorline.api.records import SourceRecord
from mirrorline.api.transforms import Transformation
from mirrorline.transforms.java_syntax import (
    DateFormatValidator,
    JavaDateFormat,
    JavaRegex,
    JavaReplacement,
    java_regex,
)

JAVA_PACKAGE = "org.apache.kafka.connect.transforms"


class BuiltinTransformation(Transformation):
    """Base of the built-in transforms: their version is mirrorline's."""

    def version(self) -> str:
        """mirrorline's version."""
        return __version__


class RegexRouter(BuiltinTransformation):
    """Renames the topic of records whose whole topic name matches ``regex`` (Connect's RegexRouter)."""

    aliases = (f"{JAVA_PACKAGE}.RegexRouter",)
    config_def = ConfigDef([
        ConfigKey("regex", Type.STRING, importance=Importance.HIGH, validator=JavaRegex(),
                  doc="Regular expression to use for matching (the whole topic name must match)."),
        ConfigKey("replacement", Type.STRING, importance=Importance.HIGH,
                  doc="Replacement string: $1 or ${name} insert the regex's groups, \\$ is a dollar sign."),
    ])

    def configure(self, config: Config) -> None:
        """Compile the regex and check the replacement's group references against it."""
        self.regex = java_regex(config["regex"])
        try:
            self.replacement = JavaReplacement(config["replacement"], self.regex)
        except ValueError as exc:
            raise ConfigError(f"replacement: {exc}") from None

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        """The record with its topic replaced, if the topic matches; else the record unchanged."""
        match = self.regex.fullmatch(record.topic)
        if match is None:
            return record
        return dataclasses.replace(record, topic=self.replacement.expand(match))


class TimestampRouter(BuiltinTransformation):
    """Routes each record to a topic named from its topic and its timestamp (Connect's TimestampRouter)."""

    aliases = (f"{JAVA_PACKAGE}.TimestampRouter",)
    config_def = ConfigDef([
        ConfigKey("topic.format", Type.STRING, default="${topic}-${timestamp}", importance=Importance.HIGH,
                  validator=NonEmptyString(),
                  doc="Format string which can contain ${topic} and ${timestamp} as placeholders for the topic "
                      "and timestamp, respectively."),
        ConfigKey("timestamp.format", Type.STRING, default="yyyyMMdd", importance=Importance.HIGH,
                  validator=DateFormatValidator(),
                  doc="Format string for the timestamp that is compatible with java.text.SimpleDateFormat "
                      "(formatted in UTC)."),
    ])

    def configure(self, config: Config) -> None:
        """Parse the date format once."""
        self.topic_format = config["topic.format"]
        self.date_format = JavaDateFormat(config["timestamp.format"])

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        """The record routed to ``topic.format`` with its placeholders filled in."""
        if record.timestamp is None:
            raise DataError("Timestamp missing on record: TimestampRouter needs the record's timestamp")
        topic = self.topic_format.replace("${topic}", record.topic).replace(
            "${timestamp}", self.date_format.format(record.timestamp))
        return dataclasses.replace(record, topic=topic)


class Filter(BuiltinTransformation):
    """Drops every record it is applied to: give it a ``predicate`` to drop some (Connect's Filter)."""

    aliases = (f"{JAVA_PACKAGE}.Filter",)

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        """None: the record is dropped."""
        return None
