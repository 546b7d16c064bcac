"""mm2.properties interpretation: flows, cluster props, worker and connector configs (mm2.md §6)."""

import pytest

from mirrorline.api import ConfigError
from mirrorline.clients.configfile import parse_properties

from mirrorline.connectors.mm2.mm2_config import (
    BYTE_ARRAY_CONVERTER,
    CONNECTOR_NAMES,
    Flow,
    MirrorMakerConfig,
)

MM2_PROPERTIES = r"""
# Two clusters, A replicated to B
clusters = A, B
A.bootstrap.servers = a1:9092,a2:9092
B.bootstrap.servers = b1:9092

A.security.protocol = SASL_SSL
A.sasl.mechanism = PLAIN
A.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required \
    username="mm2" password="secret";
A.consumer.max.poll.records = 500

A->B.enabled = true
A->B.topics = orders.*
A->B.tasks.max = 4

replication.factor=1
tasks.max = 2
topics = ignored-by-flow-override
groups = app-.*
offset.flush.interval.ms = 99999
B.offset.flush.interval.ms = 1000
not.a.connector.key = x
"""

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="mm2" password="secret";'


def config(extra: str = "", text: str = MM2_PROPERTIES) -> MirrorMakerConfig:
    return MirrorMakerConfig(parse_properties(text + "\n" + extra))


# ---------------------------------------------------------------- flows (§6.2)


def test_flows_default_heartbeat_only_reverse_flow():
    flows = config().flows()
    assert [(f.source, f.target, f.enabled, f.heartbeats_enabled) for f in flows] == [
        ("A", "B", True, True),
        ("B", "A", False, True),
    ]
    assert all(isinstance(f, Flow) for f in flows)
    assert flows[0].name == "A->B"
    for flow in flows:
        assert set(flow.connector_configs) == set(CONNECTOR_NAMES)
    reverse = flows[1]
    assert reverse.connector_configs["MirrorSourceConnector"]["enabled"] == "false"
    assert reverse.worker_config["bootstrap.servers"] == "a1:9092,a2:9092"
    assert reverse.worker_config["group.id"] == "B-mm2"


def test_emit_heartbeats_disabled_removes_heartbeat_only_flow():
    flows = config("emit.heartbeats.enabled = false").flows()
    assert [(f.source, f.target, f.heartbeats_enabled) for f in flows] == [("A", "B", False)]


def test_flow_level_heartbeats_override():
    cfg = config("emit.heartbeats.enabled = false\nB->A.emit.heartbeats.enabled = true")
    assert [(f.source, f.target) for f in cfg.flows()] == [("A", "B"), ("B", "A")]
    cfg = config("B->A.emit.heartbeats.enabled = false")
    assert [(f.source, f.target) for f in cfg.flows()] == [("A", "B")]


def test_clusters_filter_by_target():
    cfg = config()
    assert [(f.source, f.target) for f in cfg.flows(["B"])] == [("A", "B")]
    assert [(f.source, f.target) for f in cfg.flows(["A"])] == [("B", "A")]
    assert len(cfg.flows(["A", "B"])) == 2


def test_no_flows_is_an_error():
    cfg = config("emit.heartbeats.enabled = false\nA->B.enabled = false")
    with pytest.raises(ConfigError, match=r"^No source->target replication flows\.$"):
        cfg.flows()
    cfg = config("emit.heartbeats.enabled = false")
    with pytest.raises(ConfigError, match="No source->target replication flows."):
        cfg.flows(["A"])


def test_clusters_filter_unknown_alias():
    with pytest.raises(ConfigError, match="C"):
        config().flows(["C"])


def test_three_clusters_every_ordered_pair():
    cfg = MirrorMakerConfig({"clusters": "x,y , z", "x.bootstrap.servers": "x:1",
                             "y.bootstrap.servers": "y:1", "z.bootstrap.servers": "z:1"})
    assert cfg.clusters == ["x", "y", "z"]
    assert [(f.source, f.target) for f in cfg.flows()] == [
        ("x", "y"), ("x", "z"), ("y", "x"), ("y", "z"), ("z", "x"), ("z", "y")]
    assert not any(f.enabled for f in cfg.flows())


def test_invalid_boolean_is_reported():
    with pytest.raises(ConfigError, match=r"A->B\.enabled"):
        config("A->B.enabled = yes").flows()


# ---------------------------------------------------------------- cluster props (§6.3)


def test_cluster_props_expand_security_keys_to_clients():
    props = config().cluster_props("A")
    assert props["bootstrap.servers"] == "a1:9092,a2:9092"
    for role in ("producer", "consumer", "admin"):
        assert props[f"{role}.bootstrap.servers"] == "a1:9092,a2:9092"
        assert props[f"{role}.security.protocol"] == "SASL_SSL"
        assert props[f"{role}.sasl.mechanism"] == "PLAIN"
        assert props[f"{role}.sasl.jaas.config"] == JAAS
    assert props["consumer.max.poll.records"] == "500"
    assert "producer.max.poll.records" not in props
    assert "security.protocol" not in config().cluster_props("B")


def test_cluster_props_top_level_security_keys_fill_gaps():
    cfg = config("security.protocol = SSL\nssl.truststore.location = /ts.jks")
    a, b = cfg.cluster_props("A"), cfg.cluster_props("B")
    assert a["security.protocol"] == "SASL_SSL"  # cluster value wins
    assert a["consumer.security.protocol"] == "SASL_SSL"
    assert a["ssl.truststore.location"] == "/ts.jks"
    assert b["security.protocol"] == "SSL"
    assert b["admin.security.protocol"] == "SSL"
    assert b["producer.ssl.truststore.location"] == "/ts.jks"


def test_cluster_specific_client_key_beats_expanded_key():
    props = config("A.consumer.security.protocol = SASL_PLAINTEXT").cluster_props("A")
    assert props["consumer.security.protocol"] == "SASL_PLAINTEXT"
    assert props["producer.security.protocol"] == "SASL_SSL"


# ---------------------------------------------------------------- worker config (§6.4)


def test_worker_config_defaults_and_target_cluster():
    worker = config().worker_config("A", "B")
    assert worker["bootstrap.servers"] == "b1:9092"
    assert worker["client.id"] == "A->B"
    assert worker["group.id"] == "A-mm2"
    assert worker["offset.storage.topic"] == "mm2-offsets.A.internal"
    assert worker["config.storage.topic"] == "mm2-configs.A.internal"
    assert worker["status.storage.topic"] == "mm2-status.A.internal"
    for converter in ("key.converter", "value.converter", "header.converter"):
        assert worker[converter] == BYTE_ARRAY_CONVERTER
    # the target's settings, not the source's
    assert "security.protocol" not in worker
    assert "consumer.max.poll.records" not in worker


def test_worker_config_offset_flush_only_per_target():
    cfg = config()
    assert cfg.worker_config("A", "B")["offset.flush.interval.ms"] == "1000"
    assert "offset.flush.interval.ms" not in cfg.worker_config("B", "A")  # top-level value ignored
    assert "replication.factor" not in cfg.worker_config("A", "B")


def test_worker_config_top_level_prefixes_win():
    cfg = config("B.group.id = custom\nB.offset.storage.topic = from-B\noffset.storage.topic = top\n"
                 "offset.storage.replication.factor = 1\nkey.converter = my.Conv\n"
                 "task.shutdown.graceful.timeout.ms = 5\n"
                 "replication.policy.class = IdentityReplicationPolicy\nconfig.providers = file\n"
                 "config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider")
    worker = cfg.worker_config("A", "B")
    assert worker["group.id"] == "custom"
    assert worker["offset.storage.topic"] == "top"
    assert worker["offset.storage.replication.factor"] == "1"
    assert worker["key.converter"] == "my.Conv"
    assert worker["value.converter"] == BYTE_ARRAY_CONVERTER
    assert worker["task.shutdown.graceful.timeout.ms"] == "5"
    assert worker["replication.policy.class"] == "IdentityReplicationPolicy"
    assert worker["config.providers"] == "file"
    assert worker["config.providers.file.class"].endswith("FileConfigProvider")


# ---------------------------------------------------------------- connector config (§6.5)


def test_connector_config_names_classes_and_aliases():
    cfg = config()
    for name in CONNECTOR_NAMES:
        conn = cfg.connector_config("A", "B", name)
        assert conn["name"] == name
        assert conn["connector.class"] == f"org.apache.kafka.connect.mirror.{name}"
        assert conn["source.cluster.alias"] == "A"
        assert conn["target.cluster.alias"] == "B"
        assert conn["enabled"] == "true"
    reverse = cfg.connector_config("B", "A", "MirrorHeartbeatConnector")
    assert reverse["enabled"] == "false"
    assert reverse["source.cluster.alias"] == "B"
    assert reverse["target.cluster.alias"] == "A"


def test_connector_config_layering():
    cfg = config()
    conn = cfg.connector_config("A", "B", "MirrorSourceConnector")
    assert conn["topics"] == "orders.*"          # flow override beats top level
    assert conn["tasks.max"] == "4"              # flow override beats top level
    assert conn["replication.factor"] == "1"     # top-level connector key
    assert conn["groups"] == "app-.*"            # checkpoint key known although no ConfigDef yet
    assert "not.a.connector.key" not in conn
    assert "offset.flush.interval.ms" not in conn
    reverse = cfg.connector_config("B", "A", "MirrorSourceConnector")
    assert reverse["topics"] == "ignored-by-flow-override"
    assert reverse["tasks.max"] == "2"


def test_connector_config_cluster_props():
    conn = config().connector_config("A", "B", "MirrorSourceConnector")
    assert conn["source.cluster.bootstrap.servers"] == "a1:9092,a2:9092"
    assert conn["target.cluster.bootstrap.servers"] == "b1:9092"
    assert conn["source.cluster.security.protocol"] == "SASL_SSL"
    assert conn["source.cluster.sasl.jaas.config"] == JAAS
    assert conn["source.consumer.max.poll.records"] == "500"
    assert conn["source.consumer.security.protocol"] == "SASL_SSL"
    assert conn["source.admin.sasl.mechanism"] == "PLAIN"
    assert conn["source.producer.bootstrap.servers"] == "a1:9092,a2:9092"
    assert conn["target.admin.bootstrap.servers"] == "b1:9092"
    assert conn["target.cluster.offset.flush.interval.ms"] == "1000"
    assert "target.cluster.security.protocol" not in conn


def test_connector_config_feeds_our_client_props():
    from mirrorline.connectors.mirror_client.config import client_props

    conn = config("consumer.auto.offset.reset = latest").connector_config("A", "B", "MirrorSourceConnector")
    consumer = client_props(conn, "source", "consumer")
    assert consumer["bootstrap.servers"] == "a1:9092,a2:9092"
    assert consumer["security.protocol"] == "SASL_SSL"
    assert consumer["max.poll.records"] == "500"
    assert client_props(conn, "target", "admin")["bootstrap.servers"] == "b1:9092"


def test_connector_config_connect_keys_and_prefixes():
    cfg = config("errors.tolerance = all\nerrors.log.enable = true\ntransforms = r\n"
                 "transforms.r.type = org.apache.kafka.connect.transforms.RegexRouter\n"
                 "replication.policy.separator = _\nconfig.providers = env\nname = nope\n"
                 "A->B.emit.checkpoints.interval.seconds = 5\nA->B.name = custom")
    conn = cfg.connector_config("A", "B", "MirrorCheckpointConnector")
    assert conn["errors.tolerance"] == "all"
    assert conn["errors.log.enable"] == "true"
    assert conn["transforms"] == "r"
    assert conn["transforms.r.type"].endswith("RegexRouter")
    assert conn["replication.policy.separator"] == "_"
    assert conn["config.providers"] == "env"
    assert conn["emit.checkpoints.interval.seconds"] == "5"
    assert conn["name"] == "custom"  # flow override wins; top-level 'name' is not copied
    assert cfg.connector_config("B", "A", "MirrorCheckpointConnector")["name"] == "MirrorCheckpointConnector"


def test_flow_enabled_false_explicitly():
    cfg = config("B->A.enabled = false")
    assert cfg.connector_config("B", "A", "MirrorSourceConnector")["enabled"] == "false"


def test_connector_config_rejects_unknown_connector_or_alias():
    cfg = config()
    with pytest.raises(ConfigError, match="MirrorFooConnector"):
        cfg.connector_config("A", "B", "MirrorFooConnector")
    with pytest.raises(ConfigError, match="'C'"):
        cfg.connector_config("A", "C", "MirrorSourceConnector")
    with pytest.raises(ConfigError):
        cfg.worker_config("A", "A")


def test_no_inline_comments():
    conn = config("A->B.topics = .* # x").connector_config("A", "B", "MirrorSourceConnector")
    assert conn["topics"] == ".* # x"


# ---------------------------------------------------------------- validation and loading


def test_missing_clusters():
    with pytest.raises(ConfigError, match="'clusters' is required"):
        MirrorMakerConfig({"A.bootstrap.servers": "a:1"})


@pytest.mark.parametrize("value", ["", "  ", " , "])
def test_empty_clusters(value):
    with pytest.raises(ConfigError, match="'clusters'"):
        MirrorMakerConfig({"clusters": value})


def test_missing_bootstrap_servers():
    with pytest.raises(ConfigError, match=r"'B\.bootstrap\.servers'"):
        MirrorMakerConfig({"clusters": "A, B", "A.bootstrap.servers": "a:1"})


def test_top_level_bootstrap_servers_serves_every_cluster():
    cfg = MirrorMakerConfig({"clusters": "A, B", "bootstrap.servers": "shared:9092", "A.bootstrap.servers": "a:1"})
    assert cfg.cluster_props("A")["bootstrap.servers"] == "a:1"
    assert cfg.cluster_props("B")["bootstrap.servers"] == "shared:9092"


def test_duplicate_aliases_collapse():
    cfg = MirrorMakerConfig({"clusters": "A,B,A", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1"})
    assert cfg.clusters == ["A", "B"]




def test_tasks_share_clients_reaches_the_connectors_top_level_and_per_flow():
    """``tasks.share.clients`` (beyond Connect) is a connector key: set at the top level, or per flow."""
    cfg = config("tasks.share.clients = false\nB->A.tasks.share.clients = true")
    assert cfg.connector_config("A", "B", "MirrorSourceConnector")["tasks.share.clients"] == "false"
    assert cfg.connector_config("B", "A", "MirrorSourceConnector")["tasks.share.clients"] == "true"
    assert "tasks.share.clients" not in config().connector_config("A", "B", "MirrorSourceConnector")
