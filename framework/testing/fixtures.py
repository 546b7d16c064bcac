"""pytest fixtures backed by real Apache Kafka clusters started with :mod:`mirrorline.localkafka`.

- ``kafka_clusters``: session-scoped dict of two clusters, ``"A"`` and ``"B"``, started once
  (in parallel) on free loopback ports under a temporary directory and stopped at the end.
- ``cluster_a`` / ``cluster_b``: their :class:`~mirrorline.localkafka.cluster.ClusterSpec`.
- ``unique_name``: makes names (topics, groups, connectors) unique to the calling test.
- ``make_topic``: creates a topic with a unique name on a cluster and returns its name.
"""

from __future__ import annotations

import os
import random
import re
import uuid

import pytest

from mirrorline.clients import process_patches
from mirrorline.localkafka.cluster import port_is_free
from mirrorline.localkafka.manager import PORT_STRIDE, LocalKafka


def pytest_configure(config):
    """Before any test makes a Kafka client: metadata requests never auto-create a topic, as in mirrorline."""
    process_patches.install()


def _free_base_port(count: int) -> int:
    """A base port such that ``count`` clusters (broker+controller each) find their ports free."""
    rng = random.Random(os.getpid())
    for _ in range(200):
        base = rng.randrange(20000, 32000, 2)  # below Linux's ephemeral range (32768+)
        ports = [base + i * PORT_STRIDE + j for i in range(count) for j in (0, 1)]
        if all(port_is_free(p) for p in ports):
            return base
    raise RuntimeError("no free loopback ports for the test clusters")


@pytest.fixture(scope="session")
def local_kafka(tmp_path_factory) -> LocalKafka:
    """The LocalKafka manager owning this test session's clusters."""
    manager = LocalKafka(tmp_path_factory.mktemp("local-kafka"), _free_base_port(12))  # room for the clusters modules add
    yield manager
    manager.stop()


@pytest.fixture(scope="session")
def kafka_clusters(local_kafka):
    """Two independent real clusters, ``A`` and ``B``, shared by the whole session."""
    clusters = local_kafka.start(["A", "B"])
    return {c.spec.name: c.spec for c in clusters}


@pytest.fixture(scope="session")
def cluster_a(kafka_clusters):
    """Cluster A's spec (``.bootstrap_servers``, ``.name``)."""
    return kafka_clusters["A"]


@pytest.fixture(scope="session")
def cluster_b(kafka_clusters):
    """Cluster B's spec."""
    return kafka_clusters["B"]


@pytest.fixture
def unique_name(request):
    """``unique_name("orders")`` -> ``"orders-<test name>-<8 hex>"``, valid as a Kafka topic name."""
    test = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name)[:60].strip("-")

    def make(prefix: str = "t") -> str:
        return f"{prefix}-{test}-{uuid.uuid4().hex[:8]}"

    return make


@pytest.fixture
def make_topic(unique_name):
    """``await make_topic(cluster, partitions=3, prefix="t", config={})`` creates a fresh topic.

    Records with fixed old timestamps need ``config=KEEP_OLD_RECORDS`` (``tests/support/kafka.py``):
    the brokers run with Kafka's default 7-day time retention.
    """
    from mirrorline.clients.kafka_admin import create_topic

    async def make(cluster, partitions: int = 1, prefix: str = "t", config: dict | None = None) -> str:
        name = unique_name(prefix)
        await create_topic(cluster.bootstrap_servers, name, partitions, config or {})
        return name

    return make
