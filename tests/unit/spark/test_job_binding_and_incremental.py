"""A MirrorSource connector's config as its flow's mm2.properties, continuing a stream, incremental reconcile."""

from __future__ import annotations

import pytest

from mirrorline.api import ConnectError
from mirrorline.connectors.mirror_client.config import client_props
from mirrorline.connectors.mirror_client.filters import TopicFilter
from mirrorline.connectors.mm2.backfill_plan import Bounds, Position, plan_partition
from mirrorline.connectors.mm2.job_binding import mm2_properties
from mirrorline.connectors.mm2.mm2_config import SOURCE_CONNECTOR, MirrorMakerConfig
from mirrorline.connectors.mm2.offset_map import PartitionMap, PartitionRange, Run
from mirrorline.connectors.mm2.reconcile_incremental import merge, next_window
from mirrorline.connectors.mm2.reconcile_result import PartitionResult

CONNECTOR = {
    "name": "my-mirror", "connector.class": "MirrorSourceConnector", "tasks.max": "4",
    "source.cluster.alias": "east", "target.cluster.alias": "west",
    "source.cluster.bootstrap.servers": "e1:9093", "source.cluster.security.protocol": "SASL_SSL",
    "source.cluster.sasl.mechanism": "SCRAM-SHA-512", "source.cluster.ssl.truststore.location": "/t.jks",
    "source.consumer.fetch.max.bytes": "1048576", "target.cluster.bootstrap.servers": "w1:9093",
    "target.producer.linger.ms": "5", "consumer.max.poll.records": "300",
    "topics": "orders.*, pay-.*", "topics.exclude": "orders.tmp", "replication.policy.class": "IdentityReplicationPolicy",
    "config.providers": "file", "config.providers.file.class": "FileConfigProvider",
    "transforms": "", "errors.tolerance": "none", "backfill.spark.enabled": "true",
}


def test_mm2_properties_of_a_connector_give_back_its_flow():
    props = mm2_properties(CONNECTOR)
    assert props["clusters"] == "east, west" and props["east->west.enabled"] == "true"
    assert props["east.bootstrap.servers"] == "e1:9093" and props["east.consumer.fetch.max.bytes"] == "1048576"
    originals = MirrorMakerConfig(props).connector_config("east", "west", SOURCE_CONNECTOR)
    for side in ("source", "target"):
        for role in ("consumer", "producer", "admin"):
            assert client_props(originals, side, role) == client_props(CONNECTOR, side, role), (side, role)
    for key in ("topics", "topics.exclude", "replication.policy.class", "config.providers.file.class"):
        assert originals[key] == CONNECTOR[key], key
    chosen = TopicFilter(originals)
    assert chosen.should_replicate_topic("orders.x") and not chosen.should_replicate_topic("orders.tmp")
    assert "backfill.spark.enabled" not in " ".join(props) and "errors.tolerance" not in " ".join(props)


BOUNDS = Bounds(0, 1000)


def test_a_streamed_partition_is_continued_after_its_stored_offset():
    r, state = plan_partition("t", 0, "A.t", BOUNDS, Position("earliest"), Position("latest"), False, 599, None,
                              0, 600, continue_streamed=True)
    assert state == "continue" and (r.start, r.end, r.base, r.streamed) == (600, 1000, 600, 599)
    assert r.checkpoint()["streamed"] == 599
    # resumed after a crash: the stored offset is still the streamed one (or already the end)
    for stored in (599, 999):
        again, state = plan_partition("t", 0, "A.t", BOUNDS, Position("earliest"), Position("latest"), False, stored,
                                      r.checkpoint(), 0, 800, continue_streamed=True)
        assert state == "resume" and (again.start, again.base, again.streamed) == (600, 600, 599)
    with pytest.raises(ConnectError, match="has streamed it since"):
        plan_partition("t", 0, "A.t", BOUNDS, Position("earliest"), Position("latest"), False, 700, r.checkpoint(),
                       0, 800, continue_streamed=True)
    # nothing left to copy; and without continue_streamed (a command's run) a streamed partition is refused
    assert plan_partition("t", 0, "A.t", BOUNDS, Position("earliest"), Position("latest"), False, 999, None, 0, 1000,
                          continue_streamed=True) == (None, "empty")
    with pytest.raises(ConnectError, match="already streamed this partition"):
        plan_partition("t", 0, "A.t", BOUNDS, Position("earliest"), Position("latest"), False, 599, None, 0, 600)


def previous_map(**changes) -> PartitionMap:
    values = dict(source_topic="t", partition=0, target_topic="A.t", source_start=0, source_end=100, target_start=0,
                  target_end=90, runs=(Run(0, 0, 40), Run(45, 40, 50)), reconcile_id="r1", created_ms=1,
                  counts={"source": 100, "target": 90, "matched": 90, "missing": 10, "missing_tail": 5,
                          "duplicated": 0, "unexpected": 0, "out_of_order": 0})
    values.update(changes)
    return PartitionMap(**values)


def test_incremental_window_starts_after_the_last_copy():
    now = PartitionRange("t", 0, "A.t", 0, 150, 0, 140)
    window, reason = next_window(now, previous_map())
    assert reason is None
    # the previous tail (95..99, not copied then) is read again; the target from where the last run stopped
    assert (window.source_start, window.source_end, window.target_start, window.target_end) == (95, 150, 90, 140)
    new = PartitionResult("t", 0, source=55, target=50, matched=50, missing=5, missing_tail=2, runs=[
        Run(95, 90, 48), Run(145, 138, 2)], first_missing=143, last_missing=149)
    whole, merged = merge(previous_map(), window, new)
    assert (whole.source_start, whole.source_end, whole.target_start, whole.target_end) == (0, 150, 0, 140)
    counts = merged.counts()
    assert counts["source"] == 150 and counts["missing"] == 10 and counts["missing_tail"] == 2
    assert counts["matched"] == 140 and counts["target"] == 140
    assert merged.runs == [Run(0, 0, 40), Run(45, 40, 98), Run(145, 138, 2)]  # 45..94 + 95..142 continue


@pytest.mark.parametrize("changes, now, why", [
    ({}, PartitionRange("t", 0, "A.t", 0, 150, 10, 140), "deleted from the copy"),
    ({"target_topic": "t"}, PartitionRange("t", 0, "A.t", 0, 150, 0, 140), "remote topic changed"),
    ({}, PartitionRange("t", 0, "A.t", 0, 50, 0, 40), "shorter than the previous map"),
])
def test_incremental_reads_everything_when_it_must(changes, now, why):
    window, reason = next_window(now, previous_map(**changes))
    assert window == now and why in reason
    assert next_window(now, None) == (now, "no previous map")
