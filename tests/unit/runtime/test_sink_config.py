"""The settings every sink connector has: ``topics`` xor ``topics.regex``, reported on the fields as Connect does."""

from __future__ import annotations

import pytest

from mirrorline.api import ConfigError
from mirrorline.api.config import ConfigValue
from mirrorline.connectors.file.sink import FileStreamSinkConnector
from mirrorline.connectors.file.source import FileStreamSourceConnector
from mirrorline.runtime.sink_config import add_topic_errors, check_topics, connector_config_def, topic_errors


def test_exactly_one_of_topics_and_topics_regex():
    assert topic_errors({"topics": "a,b"}) == {}
    assert topic_errors({"topics.regex": "a.*"}) == {}
    both = topic_errors({"topics": "a", "topics.regex": "a.*"})
    assert both == {name: ["topics and topics.regex are mutually exclusive options, but both are set."]
                    for name in ("topics", "topics.regex")}
    neither = topic_errors({"topics": " ", "topics.regex": ""})
    assert neither == {name: ["Must configure one of topics or topics.regex"] for name in ("topics", "topics.regex")}


def test_the_dead_letter_queue_is_never_consumed_by_its_own_sink():
    errors = topic_errors({"topics": "a,dlq", "errors.deadletterqueue.topic.name": "dlq"})
    assert list(errors) == ["topics"] and "The DLQ topic 'dlq' may not be included" in errors["topics"][0]
    errors = topic_errors({"topics.regex": "d.*", "errors.deadletterqueue.topic.name": "dlq"})
    assert list(errors) == ["topics.regex"]
    assert topic_errors({"topics.regex": "d", "errors.deadletterqueue.topic.name": "dlq"}) == {}  # whole name


def test_errors_land_on_the_validated_fields_of_sinks_only():
    values = [ConfigValue("topics", []), ConfigValue("topics.regex", "")]
    add_topic_errors(FileStreamSourceConnector, {}, values)
    assert all(not v.errors for v in values)
    add_topic_errors(FileStreamSinkConnector, {}, values)
    assert all(v.errors == ["Must configure one of topics or topics.regex"] for v in values)


def test_sinks_get_the_sink_settings_and_sources_do_not():
    sink_keys = connector_config_def(FileStreamSinkConnector).keys
    assert {"topics", "topics.regex", "errors.deadletterqueue.topic.name"} <= set(sink_keys)
    assert "topics" not in connector_config_def(FileStreamSourceConnector).keys
    errors = connector_config_def(FileStreamSinkConnector).validate({"name": "s", "connector.class": "x",
                                                                     "topics.regex": "a(["})
    assert any(v.name == "topics.regex" and v.errors for v in errors)


def test_the_runtime_check_names_the_field():
    with pytest.raises(ConfigError, match="^topics: "):
        check_topics({})
    check_topics({"topics": "a"})
