"""Metadata answers decoded lazily, and an unchanged answer applied without a rebuild (mirrorline.clients.metadata_reuse).

Without a broker: answers encoded with aiokafka's own schema. The real-broker case (an unchanged
refresh keeps the view, a grown topic is seen) is tests/integration/test_metadata_reuse_real.py.
"""

from __future__ import annotations

from io import BytesIO

import pytest
from aiokafka.cluster import ClusterMetadata
from aiokafka.protocol.metadata import MetadataResponse_v4, MetadataResponse_v5

from mirrorline.clients import metadata_reuse, process_patches

process_patches.install()


def answer_bytes(partitions: int, *, rack: str | None = "r1", version=MetadataResponse_v5) -> bytes:
    parts = [(0, p, 1, [1, 2], [1], []) if version is MetadataResponse_v5 else (0, p, 1, [1, 2], [1])
             for p in range(partitions)]
    return version(0, [(1, "b1.example", 9092, rack), (2, "b2.example", 9093, None)], "cluster-x", 2,
                   [(0, "orders", False, parts)]).encode()


@pytest.mark.parametrize("version", [MetadataResponse_v4, MetadataResponse_v5])
def test_the_header_is_read_by_hand_and_the_rest_by_aiokafka_as_before(version):
    body = answer_bytes(3, version=version)
    lazy = version.decode(BytesIO(body))
    eager = metadata_reuse._ORIGINAL_DECODE[version.API_VERSION](BytesIO(body))
    assert type(lazy) is metadata_reuse.LazyMetadataAnswer and lazy._decoded is None
    assert (lazy.API_VERSION, lazy.throttle_time_ms, lazy.brokers, lazy.cluster_id, lazy.controller_id) == \
           (version.API_VERSION, eager.throttle_time_ms, eager.brokers, eager.cluster_id, eager.controller_id)
    assert lazy._decoded is None  # the header alone decodes nothing else
    assert lazy.topics == eager.topics and lazy.to_object() == eager.to_object()


def test_an_answer_equal_to_the_last_one_applied_wakes_waiters_and_listeners_without_a_rebuild():
    cluster = ClusterMetadata(metadata_max_age_ms=300_000)
    heard = []
    cluster.add_listener(heard.append)
    cluster.update_metadata(MetadataResponse_v5.decode(BytesIO(answer_bytes(3))))
    view = cluster._partitions
    assert cluster.partitions_for_topic("orders") == {0, 1, 2} and len(heard) == 1

    waiting = cluster.request_update()
    cluster._last_successful_refresh_ms = 0
    again = MetadataResponse_v5.decode(BytesIO(answer_bytes(3)))
    cluster.update_metadata(again)
    assert cluster._partitions is view and again._decoded is None  # neither decoded nor rebuilt
    assert waiting.done() and waiting.result() is cluster and not cluster._need_update
    assert cluster._last_successful_refresh_ms > 0 and len(heard) == 2

    grown = MetadataResponse_v5.decode(BytesIO(answer_bytes(5)))
    cluster.update_metadata(grown)
    assert cluster._partitions is not view and cluster.partitions_for_topic("orders") == {0, 1, 2, 3, 4}
    assert len(heard) == 3


def test_an_answer_without_brokers_is_refused_as_before_and_the_next_good_one_is_applied():
    cluster = ClusterMetadata(metadata_max_age_ms=300_000)
    cluster.update_metadata(MetadataResponse_v5.decode(BytesIO(answer_bytes(2))))
    empty = MetadataResponse_v5(0, [], "cluster-x", -1, []).encode()
    cluster.update_metadata(MetadataResponse_v5.decode(BytesIO(empty)))  # aiokafka ignores it (a warning)
    assert cluster.partitions_for_topic("orders") == {0, 1}
    cluster.update_metadata(MetadataResponse_v5.decode(BytesIO(answer_bytes(4))))
    assert cluster.partitions_for_topic("orders") == {0, 1, 2, 3}


def test_install_is_idempotent():
    metadata_reuse.install()
    assert metadata_reuse.is_installed() and ClusterMetadata.update_metadata is metadata_reuse.update_metadata
