"""Guards against flows that loop without end: empty separator, source and target one cluster (no Kafka)."""

from __future__ import annotations

import pytest

from mirrorline.api import ConfigError

from mirrorline.connectors.checkpoint.connector import MirrorCheckpointConnector
from mirrorline.connectors.heartbeat.connector import MirrorHeartbeatConnector
from mirrorline.connectors.mirror_client.clients import refuse_same_cluster, same_cluster_flow_allowed
from mirrorline.connectors.mirror_client.config import COMMON_CONFIG_DEF, load_replication_policy
from mirrorline.connectors.mm2.mm2_config import MirrorMakerConfig
from mirrorline.connectors.mirror_client.policies import DefaultReplicationPolicy, SuffixReplicationPolicy
from mirrorline.connectors.source_mirror.connector import MirrorSourceConnector

SEP = "replication.policy.separator"
BASE = {"source.cluster.alias": "A", "target.cluster.alias": "B",
        "source.cluster.bootstrap.servers": "a:9092", "target.cluster.bootstrap.servers": "b:9092"}


def errors_of(values, name: str) -> list[str]:
    return next(v.errors for v in values if v.name == name)


@pytest.mark.parametrize("separator", ["", "   "])
@pytest.mark.parametrize("connector", [MirrorSourceConnector, MirrorCheckpointConnector, MirrorHeartbeatConnector])
def test_empty_separator_is_an_error_on_that_field(connector, separator):
    # what REST's PUT /connector-plugins/{plugin}/config/validate reports
    values = connector().validate({**BASE, "connector.class": connector.__name__, SEP: separator})
    (error,) = errors_of(values, SEP)
    assert f"for configuration {SEP}: must not be empty" in error and "cycle detection" in error
    assert [v.name for v in values if v.errors] == [SEP]


def test_non_empty_separators_pass():
    for separator in (".", "_", "--"):
        assert errors_of(COMMON_CONFIG_DEF.validate({**BASE, SEP: separator}), SEP) == []
    assert errors_of(COMMON_CONFIG_DEF.validate(BASE), SEP) == []  # default "."


@pytest.mark.parametrize("policy", [DefaultReplicationPolicy, SuffixReplicationPolicy])
def test_policies_refuse_an_empty_separator(policy):
    with pytest.raises(ValueError, match=f"{SEP}: must not be empty"):
        policy({SEP: ""})


def test_load_replication_policy_reports_a_config_error():
    with pytest.raises(ConfigError, match=f"{SEP}: must not be empty"):
        load_replication_policy({SEP: ""})


def mm2(**extra: str) -> MirrorMakerConfig:
    props = {"clusters": "A, B", "A.bootstrap.servers": "a:9092", "B.bootstrap.servers": "b:9092",
             "A->B.enabled": "true", **extra}
    return MirrorMakerConfig(props)


@pytest.mark.parametrize("key", [SEP, f"A->B.{SEP}"])
def test_mm2_properties_surface_the_empty_separator(key):
    with pytest.raises(ConfigError) as raised:
        mm2(**{key: ""}).flows()
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("flow A->B: Invalid value") and f"configuration {SEP}: must not be empty" in message
    assert message.count(SEP) == 1  # one problem, reported once for all flows and connectors


def test_mm2_properties_surface_a_bad_regex_once():
    with pytest.raises(ConfigError) as raised:
        mm2(topics="[").flows()
    message = str(raised.value)
    assert "\n" not in message and message.count("configuration topics") == 1
    assert "invalid regular expression '['" in message


def test_mm2_leaves_placeholders_to_the_worker():
    flows = mm2(**{"config.providers": "env", "topics": "${env:TOPICS}"}).flows()
    assert flows[0].connector_configs["MirrorSourceConnector"]["topics"] == "${env:TOPICS}"


def test_same_cluster_is_refused_naming_both_aliases_and_the_id():
    with pytest.raises(ConfigError) as raised:
        refuse_same_cluster("A", "Xy-Z0", "A2", "Xy-Z0")
    message = str(raised.value)
    assert "'A'" in message and "'A2'" in message and "cluster id Xy-Z0" in message
    assert "allow.same.cluster.flow=true" in message and "\n" not in message


@pytest.mark.parametrize("source_id, target_id", [("one", "two"), (None, None), ("one", None), (None, "one")])
def test_different_or_unknown_clusters_pass(source_id, target_id):
    refuse_same_cluster("A", source_id, "B", target_id)


@pytest.mark.parametrize("config, allowed", [
    ({}, False), ({"allow.same.cluster.flow": "false"}, False), ({"allow.same.cluster.flow": "TRUE"}, True),
    ({"allow.same.cluster.flow": True}, True),
])
def test_allow_setting(config, allowed):
    assert same_cluster_flow_allowed(config) is allowed


def test_allow_setting_reaches_mm2_connectors():
    for key in ("allow.same.cluster.flow", "A->B.allow.same.cluster.flow"):
        configs = mm2(**{key: "true"}).flows()[0].connector_configs
        assert all(same_cluster_flow_allowed(c) for c in configs.values())
