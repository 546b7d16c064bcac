"""Exactly-once settings (KIP-618): Connect's names, defaults and messages, and the preflight checks."""

from __future__ import annotations

import pytest

from mirrorline.api import (
    ConfigError,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SourceConnector,
    SourceTask,
)
from mirrorline.api.errors import BadRequestError
from mirrorline.connectors.mm2.mm2_config import MirrorMakerConfig
from mirrorline.connectors.source_mirror.connector import MirrorSourceConnector
from mirrorline.runtime.abstract_herder import _config_infos, validate_or_raise
from mirrorline.runtime.exactly_once import NOT_DECLARED, NOT_ENABLED, NOT_SUPPORTED, transactional_id
from mirrorline.runtime.worker_config import DISTRIBUTED_CONFIG_DEF, WORKER_CONFIG_DEF
from support.herder_fakes import registry_of


class _Task(SourceTask):
    async def start(self, config):
        pass

    async def poll(self):
        return []

    async def stop(self):
        pass


class Declares(SourceConnector):
    """Answers exactly-once questions from its config: ``eos`` and ``boundaries`` (yes/no/none)."""

    async def start(self, config):
        pass

    def task_class(self):
        return _Task

    async def task_configs(self, max_tasks):
        return []

    async def stop(self):
        pass

    def exactly_once_support(self, config):
        return {"yes": ExactlyOnceSupport.SUPPORTED, "no": ExactlyOnceSupport.UNSUPPORTED}.get(config.get("eos"))

    def can_define_transaction_boundaries(self, config):
        if config.get("boundaries") == "boom":
            raise RuntimeError("cannot tell")
        return ConnectorTransactionBoundaries.SUPPORTED if config.get("boundaries") == "yes" \
            else ConnectorTransactionBoundaries.UNSUPPORTED


PLUGINS = registry_of(Declares)


def errors(config: dict, support: str | None = "enabled") -> dict[str, list[str]]:
    infos = _config_infos("Declares", Declares, {"connector.class": "Declares", "name": "d", **config}, PLUGINS,
                          exactly_once=support)
    return {c["value"]["name"]: c["value"]["errors"] for c in infos["configs"] if c["value"]["errors"]}


def test_defaults_and_values_are_connects():
    infos = _config_infos("Declares", Declares, {"connector.class": "Declares", "name": "d"}, PLUGINS)
    values = {c["value"]["name"]: c["value"]["value"] for c in infos["configs"]}
    assert values["exactly.once.support"] == "requested" and values["transaction.boundary"] == "poll"
    assert values["transaction.boundary.interval.ms"] is None and values["offsets.storage.topic"] is None
    groups = {c["definition"]["name"]: c["definition"]["group"] for c in infos["configs"]}
    assert groups["transaction.boundary"] == "Exactly Once Support" and groups["offsets.storage.topic"] == "offsets.topic"
    assert transactional_id("A-mm2", "MirrorSourceConnector", 0) == "A-mm2-MirrorSourceConnector-0"


@pytest.mark.parametrize("config, field, message", [
    ({"transaction.boundary": "batch"}, "transaction.boundary",
     "Invalid value batch for configuration transaction.boundary: String must be one of (case insensitive): "
     "POLL, INTERVAL, CONNECTOR"),
    ({"exactly.once.support": "always"}, "exactly.once.support",
     "Invalid value always for configuration exactly.once.support: String must be one of (case insensitive): "
     "REQUESTED, REQUIRED"),
    ({"transaction.boundary.interval.ms": "-5"}, "transaction.boundary.interval.ms",
     "Invalid value -5 for configuration transaction.boundary.interval.ms: Value must be at least 0"),
    ({"offsets.storage.topic": " "}, "offsets.storage.topic",
     "Invalid value   for configuration offsets.storage.topic: String may not be empty"),
    ({"exactly.once.support": "required"}, "exactly.once.support", NOT_DECLARED),
    ({"exactly.once.support": "Required", "eos": "no"}, "exactly.once.support", NOT_SUPPORTED),
    ({"transaction.boundary": "CONNECTOR"}, "transaction.boundary",
     "The connector does not support connector-defined transaction boundaries with the given configuration. "
     "Please reconfigure it to use a different transaction boundary definition."),
    ({"transaction.boundary": "connector", "boundaries": "boom"}, "transaction.boundary",
     "An unexpected error occurred during validation: cannot tell"),
])
def test_what_cannot_hold_is_an_error_on_its_field(config, field, message):
    assert message in errors(config).get(field, []), errors(config)


def test_what_can_hold_passes():
    assert errors({"exactly.once.support": "REQUIRED", "eos": "yes", "transaction.boundary": "connector",
                   "boundaries": "yes", "transaction.boundary.interval.ms": "0"}) == {}


def test_required_needs_the_worker_to_have_it_enabled():
    assert errors({"exactly.once.support": "required", "eos": "yes"}, "preparing") == \
        {"exactly.once.support": [NOT_ENABLED]}
    standalone = errors({"exactly.once.support": "required", "eos": "yes"}, None)["exactly.once.support"]
    assert standalone[0].startswith(NOT_ENABLED) and "Standalone workers never write exactly-once" in standalone[0]
    with pytest.raises(BadRequestError, match="exactly.once.support: This worker does not have exactly-once"):
        validate_or_raise(PLUGINS, {"connector.class": "Declares", "name": "d", "exactly.once.support": "required",
                                    "eos": "yes"}, exactly_once="disabled")


def test_the_worker_setting_is_connects():
    assert DISTRIBUTED_CONFIG_DEF.parse({"group.id": "g", "config.storage.topic": "c", "offset.storage.topic": "o",
                                         "status.storage.topic": "s"})["exactly.once.source.support"] == "disabled"
    value = [v for v in DISTRIBUTED_CONFIG_DEF.validate({"exactly.once.source.support": "on"})
             if v.name == "exactly.once.source.support"][0]
    assert value.errors == ["Invalid value on for configuration exactly.once.source.support: String must be one of: "
                            "disabled, preparing, enabled"]
    assert "exactly.once.source.support" not in WORKER_CONFIG_DEF.keys  # standalone workers have no such setting


def test_mirror_source_supports_exactly_once_when_it_reads_committed_records():
    connector = MirrorSourceConnector()
    assert connector.exactly_once_support({}) == ExactlyOnceSupport.SUPPORTED  # mirrorline's default
    assert connector.exactly_once_support({"source.consumer.isolation.level": "read_uncommitted"}) == \
        ExactlyOnceSupport.UNSUPPORTED
    assert connector.exactly_once_support({"consumer.isolation.level": "read_uncommitted",
                                           "source.consumer.isolation.level": "read_committed"}) == \
        ExactlyOnceSupport.SUPPORTED
    values = connector.validate({"exactly.once.support": "required", "consumer.isolation.level": "read_uncommitted",
                                 "source.cluster.alias": "A"})
    assert any("MirrorSourceConnector can only provide exactly-once guarantees" in e
               for v in values if v.name == "exactly.once.support" for e in v.errors)


def test_mm2_properties_for_java_mm2_with_exactly_once_work_unchanged():
    config = MirrorMakerConfig({"clusters": "A, B", "A.bootstrap.servers": "a:9092", "B.bootstrap.servers": "b:9092",
                                "A->B.enabled": "true", "B.exactly.once.source.support": "enabled",
                                "dedicated.mode.enable.internal.rest": "true",
                                "A->B.exactly.once.support": "required", "A->B.transaction.boundary": "interval"})
    assert config.enable_internal_rest
    flow = next(f for f in config.flows() if f.name == "A->B")
    assert flow.worker_config["exactly.once.source.support"] == "enabled"
    source = flow.connector_configs["MirrorSourceConnector"]
    assert source["exactly.once.support"] == "required" and source["transaction.boundary"] == "interval"
    with pytest.raises(ConfigError, match="Invalid value yes for configuration dedicated.mode.enable.internal.rest: "
                                          "Expected value to be either true or false"):
        MirrorMakerConfig({"clusters": "A", "A.bootstrap.servers": "a:9092",
                           "dedicated.mode.enable.internal.rest": "yes"})
