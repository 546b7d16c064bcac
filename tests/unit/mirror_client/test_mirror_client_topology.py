"""MirrorClient's topology answers (upstream clusters, hops, remote topics) from a cluster's topic list."""

from __future__ import annotations

import pytest

from mirrorline.connectors.mirror_client.client import MirrorClient
from mirrorline.testing.plugin_kit import FakeKafkaClients


class TopicsOnly(MirrorClient):
    """A MirrorClient whose cluster is just a topic list: the topology logic is pure."""

    def __init__(self, topics: list[str], **config: str):
        super().__init__({"bootstrap.servers": "unused:9092", **config}, FakeKafkaClients())
        self._topics = topics

    async def topics(self) -> list[str]:
        return sorted(self._topics)


TOPICS = ["heartbeats", "A.heartbeats", "B.A.heartbeats", "C.heartbeats", "orders", "A.orders", "B.A.orders",
          "A.checkpoints.internal", "mm2-offset-syncs.C.internal", "__consumer_offsets"]


async def test_heartbeat_and_checkpoint_topics():
    client = TopicsOnly(TOPICS)
    assert await client.heartbeat_topics() == ["A.heartbeats", "B.A.heartbeats", "C.heartbeats", "heartbeats"]
    assert await client.checkpoint_topics() == ["A.checkpoints.internal"]


async def test_upstream_clusters_follow_every_chain():
    assert await TopicsOnly(TOPICS).upstream_clusters() == {"A", "B", "C"}
    assert await TopicsOnly(["heartbeats"]).upstream_clusters() == set()


@pytest.mark.parametrize("alias, hops", [("A", 1), ("B", 1), ("C", 1), ("D", -1)])
async def test_replication_hops_is_the_shortest_path(alias, hops):
    assert await TopicsOnly(TOPICS).replication_hops(alias) == hops


async def test_hops_through_an_intermediate_cluster():
    client = TopicsOnly(["B.A.heartbeats", "C.B.A.heartbeats"])
    assert await client.replication_hops("B") == 1
    assert await client.replication_hops("A") == 2
    assert await client.upstream_clusters() == {"A", "B", "C"}


async def test_remote_topics_leave_out_internal_and_local_topics():
    client = TopicsOnly(TOPICS)
    assert await client.remote_topics() == ["A.heartbeats", "A.orders", "B.A.heartbeats", "B.A.orders",
                                            "C.heartbeats"]
    assert await client.remote_topics("A") == ["A.heartbeats", "A.orders"]


async def test_custom_separator_is_honoured():
    client = TopicsOnly(["A_heartbeats", "A_orders", "A_checkpoints_internal"], **{"replication.policy.separator": "_"})
    assert await client.replication_hops("A") == 1
    assert await client.remote_topics("A") == ["A_heartbeats", "A_orders"]
    assert await client.checkpoint_topics() == ["A_checkpoints_internal"]
