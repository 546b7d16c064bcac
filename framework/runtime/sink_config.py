"""Settings every sink connector has (Kafka Connect's ``SinkConnectorConfig``): ``topics`` or ``topics.regex``,
and the dead-letter queue (``errors.deadletterqueue.*``).

The runtime owns them, not the plugin: they are merged into each sink connector's settings for
parsing, ``config/validate`` and REST create, and the cross-field rule (exactly one of the two,
and never the connector's own dead-letter queue topic) is reported on the fields, with
Connect's messages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from mirrorline.api.config import ConfigDef, ConfigKey, ConfigValue, Importance, Type, Validator, split_list
from mirrorline.api.connector import Connector
from mirrorline.api.errors import ConfigError
from mirrorline.runtime.connector_config import CONNECTOR_CONFIG_DEF
from mirrorline.runtime.error_handling import DLQ_CONFIG_KEYS
from mirrorline.runtime.source_config import SOURCE_CONFIG_DEF as EXACTLY_ONCE_CONFIG_DEF

TOPICS = "topics"
TOPICS_REGEX = "topics.regex"
DLQ_TOPIC = "errors.deadletterqueue.topic.name"
SINK_GROUP = "Common"
#: Connect's prefix of a connector's consumer overrides, and the worker's consumer settings.
CONSUMER_OVERRIDE_PREFIX = "consumer.override."
CONSUMER_PREFIX = "consumer."


class Regex(Validator):
    """A valid regular expression (Python ``re`` syntax), or nothing."""

    def __call__(self, name: str, value: Any) -> None:
        if value:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"invalid regular expression {value!r}: {exc}") from None

    def __str__(self) -> str:
        return "valid regex"


SINK_CONFIG_DEF = ConfigDef([
    ConfigKey(TOPICS, Type.LIST, default="", importance=Importance.HIGH, group=SINK_GROUP, order=4,
              display_name="Topics",
              doc="List of topics to consume, separated by commas. Set this or topics.regex, not both."),
    ConfigKey(TOPICS_REGEX, Type.STRING, default="", importance=Importance.HIGH, validator=Regex(),
              group=SINK_GROUP, order=4, display_name="Topics regex",
              doc="Regular expression giving topics to consume (the whole name must match; new matching "
                  "topics are picked up as they appear). Set this or topics, not both."),
    *DLQ_CONFIG_KEYS,  # errors.deadletterqueue.*: sink connectors only, as in Connect
])


def is_sink(connector_class: type[Connector]) -> bool:
    """Whether ``connector_class`` is a sink connector."""
    return getattr(connector_class, "type", None) == "sink"


def connector_config_def(connector_class: type[Connector]) -> ConfigDef:
    """The framework's settings of a connector of this class: the common ones, plus ``topics`` for a sink
    or, for a source, ``topic.creation.groups`` (its per-group settings depend on the config:
    :func:`mirrorline.runtime.topic_creation.validate`) and the exactly-once settings
    (:mod:`~mirrorline.runtime.source_config`)."""
    if is_sink(connector_class):
        return CONNECTOR_CONFIG_DEF.merged(SINK_CONFIG_DEF)
    if getattr(connector_class, "type", None) == "source":
        from mirrorline.runtime.topic_creation import SOURCE_CONFIG_DEF

        return CONNECTOR_CONFIG_DEF.merged(SOURCE_CONFIG_DEF).merged(EXACTLY_ONCE_CONFIG_DEF)
    return CONNECTOR_CONFIG_DEF


def topic_errors(config: Mapping[str, Any]) -> dict[str, list[str]]:
    """Connect's cross-field errors of a sink config, by field name (empty when it is fine)."""
    topics = split_list(config.get(TOPICS) or "")
    regex = str(config.get(TOPICS_REGEX) or "").strip()
    errors: dict[str, list[str]] = {}
    if topics and regex:
        message = f"{TOPICS} and {TOPICS_REGEX} are mutually exclusive options, but both are set."
        errors = {TOPICS: [message], TOPICS_REGEX: [message]}
    elif not topics and not regex:
        message = f"Must configure one of {TOPICS} or {TOPICS_REGEX}"
        errors = {TOPICS: [message], TOPICS_REGEX: [message]}
    dlq = str(config.get(DLQ_TOPIC) or "").strip()
    if dlq and dlq in topics:
        errors.setdefault(TOPICS, []).append(
            f"The DLQ topic '{dlq}' may not be included in the list of topics ('{TOPICS}={','.join(topics)}') "
            f"consumed by the connector")
    if dlq and regex and _full_match(regex, dlq):
        errors.setdefault(TOPICS_REGEX, []).append(
            f"The DLQ topic '{dlq}' may not be matched by the regex for the topics ('{TOPICS_REGEX}={regex}') "
            f"consumed by the connector")
    return errors


def add_topic_errors(connector_class: type[Connector], config: Mapping[str, Any],
                     values: Iterable[ConfigValue]) -> None:
    """Append the cross-field errors of a sink config to the validated ``values`` of its fields."""
    if not is_sink(connector_class):
        return
    errors = topic_errors(config)
    for value in values:
        for message in errors.get(value.name, ()):
            if message not in value.errors:
                value.errors.append(message)


def check_topics(config: Mapping[str, Any]) -> None:
    """Raise ConfigError naming the field when a sink config's topics are wrong (the runtime's last check)."""
    for name, messages in topic_errors(config).items():
        raise ConfigError(f"{name}: {messages[0]}")


def topics_pattern(regex: str) -> str:
    """``topics.regex`` as a pattern the consumer can match with ``re.match``: the whole name, as Java's ``matches``."""
    return f"(?:{regex})\\Z"


def _full_match(regex: str, topic: str) -> bool:
    try:
        return re.fullmatch(regex, topic) is not None
    except re.error:
        return False
