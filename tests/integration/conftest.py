"""Integration-test helpers: a MirrorSource flow config between the session's clusters A and B."""

from __future__ import annotations

import pytest


@pytest.fixture
def flow_config(cluster_a, cluster_b):
    """``flow_config(**overrides)``: MirrorSourceConnector config for A->B (replication factor 1)."""
    def make(source=None, target=None, source_alias="A", target_alias="B", **overrides) -> dict[str, str]:
        source = source or cluster_a
        target = target or cluster_b
        config = {
            "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
            "source.cluster.alias": source_alias, "target.cluster.alias": target_alias,
            "source.cluster.bootstrap.servers": source.bootstrap_servers,
            "target.cluster.bootstrap.servers": target.bootstrap_servers,
            "replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
            "tasks.max": "2", "refresh.topics.interval.seconds": "2", "sync.topic.configs.interval.seconds": "2",
        }
        config.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
        return config
    return make

