"""Topic creation settings (KIP-158) without a broker: Connect's rules for groups, defaults and validation.

The broker side (a topic created with exactly its group's settings, ACLs refusing it) is in
tests/integration/test_topic_creation.py and test_topic_creation_acls.py.
"""

from __future__ import annotations

import logging

import pytest

from mirrorline.api.errors import BadRequestError, ConfigError
from mirrorline.plugins import PluginRegistry
from mirrorline.runtime.abstract_herder import _config_infos, validate_or_raise
from mirrorline.runtime.topic_creation import BROKER_DEFAULT, SOURCE_CONFIG_DEF, TopicCreation, validate

DEFAULTS = {"topic.creation.default.partitions": "6", "topic.creation.default.replication.factor": "1"}


def creation(**settings: str) -> TopicCreation:
    config = {**DEFAULTS, **{k.replace("__", "."): v for k, v in settings.items()}}
    result = TopicCreation.from_config(config, enabled=True)
    assert result is not None
    return result


def errors_of(config: dict[str, str]) -> dict[str, list[str]]:
    return {value.name: value.errors for _, value in validate(config) if value.errors}


def test_not_in_effect_without_topic_creation_settings_or_when_the_worker_disables_it():
    assert TopicCreation.from_config({"topic": "t"}, enabled=True) is None
    assert TopicCreation.from_config({**DEFAULTS, "topic.creation.default.partitions": "0"}, enabled=False) is None
    # any topic.creation.* setting puts it in effect, and then default's two settings are required
    with pytest.raises(ConfigError) as missing:
        TopicCreation.from_config({"topic.creation.groups": "hot"}, enabled=True)
    assert 'Missing required configuration "topic.creation.default.replication.factor"' in str(missing.value)
    assert 'Missing required configuration "topic.creation.default.partitions"' in str(missing.value)


def test_default_group_settings_and_topic_configs():
    result = creation(**{"topic.creation.default.cleanup.policy": "compact",
                         "topic.creation.default.min.insync.replicas": "1"})
    group = result.group_for("anything")
    assert (group.name, group.partitions, group.replication_factor) == ("default", 6, 1)
    assert group.configs == {"cleanup.policy": "compact", "min.insync.replicas": "1"}
    assert result.groups == ()


def test_first_listed_group_that_takes_the_topic_wins_and_exclusion_wins_over_inclusion():
    result = TopicCreation.from_config({
        **DEFAULTS, "topic.creation.groups": "hot, warm, default",
        "topic.creation.hot.include": "orders.*, payments", "topic.creation.hot.exclude": ".*-test",
        "topic.creation.hot.partitions": "12", "topic.creation.hot.retention.ms": "3600000",
        "topic.creation.warm.include": "orders.*", "topic.creation.warm.replication.factor": "-1",
        "topic.creation.default.include": "never-used",  # default's include/exclude are ignored
    }, enabled=True)
    assert [g.name for g in result.groups] == ["hot", "warm"]  # "default" is not a listed group
    assert result.group_for("orders.eu").name == "hot"
    assert result.group_for("payments").name == "hot"
    assert result.group_for("payments-eu").name == "default"  # whole-name match, as Java's matches()
    assert result.group_for("orders-test").name == "warm"  # excluded from hot, taken by the next
    assert result.group_for("other").name == "default"
    hot, warm = result.groups
    assert (hot.partitions, hot.replication_factor, hot.configs) == (12, 1, {"retention.ms": "3600000"})
    assert (warm.partitions, warm.replication_factor, warm.configs) == (6, BROKER_DEFAULT, {})  # inherits 6


def test_a_listed_group_with_no_include_takes_no_topic():
    result = creation(topic__creation__groups="empty", topic__creation__empty__partitions="3")
    assert [g.name for g in result.groups] == ["empty"]
    assert result.group_for("x").name == result.group_for("empty").name == "default"


def test_listing_default_only_warns(caplog):
    with caplog.at_level(logging.WARNING, logger="mirrorline.runtime.topic_creation"):
        result = creation(topic__creation__groups="default")
    assert result.groups == ()
    assert "'default' topic creation group always exists" in caplog.text


@pytest.mark.parametrize(("name", "value", "message"), [
    ("topic.creation.default.partitions", "0",
     "Invalid value 0 for configuration topic.creation.default.partitions: Number of partitions must be positive, "
     "or -1 to use the broker's default"),
    ("topic.creation.default.replication.factor", "-2",
     "Invalid value -2 for configuration topic.creation.default.replication.factor: Replication factor must be "
     "positive and not larger than the number of brokers in the Kafka cluster, or -1 to use the broker's default"),
    ("topic.creation.default.replication.factor", "40000", "at most 32767"),
    ("topic.creation.default.partitions", "six", "Invalid value six for configuration"),
    ("topic.creation.hot.include", "orders-(", "Syntax error in regular expression"),
    ("topic.creation.hot.exclude", "*", "Syntax error in regular expression"),
    ("topic.creation.hot.partitions", "-5", "Number of partitions must be positive"),
])
def test_bad_values_are_reported_on_their_field(name, value, message):
    config = {**DEFAULTS, "topic.creation.groups": "hot", name: value}
    errors = errors_of(config)
    assert list(errors) == [name] and message in errors[name][0], errors
    with pytest.raises(ConfigError, match=name):
        TopicCreation.from_config(config, enabled=True)


def test_minus_one_means_the_broker_default_and_is_valid():
    assert not errors_of({"topic.creation.default.partitions": "-1", "topic.creation.default.replication.factor": "-1"})


def test_duplicate_groups_are_refused():
    (value,) = SOURCE_CONFIG_DEF.validate({"topic.creation.groups": "a,b,a"})
    assert value.errors == ["Invalid value a,b,a for configuration topic.creation.groups: Duplicate alias provided."]


REGISTRY = PluginRegistry.discover()


def test_config_validate_shows_the_group_keys_and_their_errors_for_a_source_connector():
    config = {"name": "s", "connector.class": "FileStreamSource", "topic": "t", "file": "/tmp/in",
              **DEFAULTS, "topic.creation.groups": "hot", "topic.creation.hot.include": "a("}
    cls = REGISTRY.connector_class("FileStreamSource")
    infos = _config_infos("FileStreamSource", cls, config, REGISTRY, True)
    names = [c["definition"]["name"] for c in infos["configs"]]
    assert "topic.creation.groups" in names and "topic.creation.hot.partitions" in names
    assert "Topic Creation: hot" in infos["groups"] and infos["error_count"] == 1
    with pytest.raises(BadRequestError, match="topic.creation.hot.include: Invalid value a\\("):
        validate_or_raise(REGISTRY, config, True)
    validate_or_raise(REGISTRY, config, False)  # ignored, as in Connect, when the worker disables it
    # a sink connector has no topic creation: its topic.creation.* settings are not checked
    sink = {"name": "k", "connector.class": "FileStreamSink", "topics": "t", "file": "/tmp/out",
            "topic.creation.default.partitions": "0"}
    validate_or_raise(REGISTRY, sink, True)
