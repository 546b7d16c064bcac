"""``mirrorline reconcile``'s settings and table, and ``--exact`` placement from maps (no Kafka, no Spark)."""

from __future__ import annotations

import argparse

import pytest
from aiokafka import TopicPartition

from mirrorline.connectors.mm2.offset_map import PartitionMap, Run
from mirrorline.connectors.mirror_client.policies import DefaultReplicationPolicy
from mirrorline.connectors.mm2.reconcile import FLOW, STORE_MAP, TOPICS
from mirrorline.connectors.mm2.reconcile_command import ReconcileCommand, format_table, job_settings
from mirrorline.connectors.mm2.reconcile_exact import exact_or_fail, map_position
from mirrorline.api import ConfigError, ConnectError

PROPS = {"clusters": "A, B", "A.bootstrap.servers": "a:9092", "B.bootstrap.servers": "b:9092",
         "A->B.enabled": "true", "A.security.protocol": "PLAINTEXT", "spark.executor.memory": "2g"}


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    ReconcileCommand().configure_parser(parser)
    return parser.parse_args(["mm2.properties", *argv])


def test_settings_carry_the_flow_options_spark_and_both_clusters():
    settings, clients = job_settings(PROPS, parse("--flow", "A->B", "--topics", "orders.*", "--no-store",
                                                  "--spark-master", "spark://m:7077",
                                                  "--spark-conf", "spark.executor.memory=1g"))
    assert (settings[FLOW], settings[TOPICS], settings[STORE_MAP]) == ("A->B", "orders.*", "false")
    assert settings["spark.master"] == "spark://m:7077" and settings["spark.executor.memory"] == "1g"
    assert clients["source"]["bootstrap.servers"] == "a:9092" and clients["target"]["bootstrap.servers"] == "b:9092"


def test_bad_flow_and_bad_spark_setting_are_config_errors():
    with pytest.raises(ConfigError, match="unknown cluster alias"):
        job_settings(PROPS, parse("--flow", "A->C"))
    with pytest.raises(ConfigError, match="spark.KEY=VALUE"):
        job_settings(PROPS, parse("--flow", "A->B", "--spark-conf", "master=local"))


def test_table_shows_each_partition_the_totals_and_where_records_are_missing():
    row = {"topic": "orders", "target_topic": "A.orders", "source": 10, "target": 9, "matched": 8, "missing": 2,
           "missing_tail": 1, "duplicated": 1, "unexpected": 0, "out_of_order": 1, "first_missing": 3,
           "last_missing": 9, "runs": 3}
    summary = {"flow": "A->B", "partitions": [{**row, "partition": 0}, {**row, "partition": 1, "missing": 0,
                                                                          "missing_tail": 0}],
               "totals": {"source": 20, "target": 18, "matched": 16, "missing": 2, "missing_tail": 1,
                          "duplicated": 2, "unexpected": 0, "out_of_order": 2},
               "map": {"topic": "mirrorline-offset-map.A.internal", "stored": True, "runs": 6}, "seconds": 12.5}
    text = format_table(summary)
    assert "orders-0" in text and "A.orders-1" in text and "total" in text
    assert "orders-0: 2 record(s) missing between offsets 3 and 9 (1 after the last copy)" in text
    assert "orders-1: " not in text
    assert "6 run(s) stored in mirrorline-offset-map.A.internal" in text
    assert "2 source record(s) missing; 2 duplicated, 0 unexpected, 2 out of order" in text


def test_exact_positions_come_from_the_map_or_fail_saying_to_reconcile():
    maps = {("orders", 0): PartitionMap("orders", 0, "A.orders", 0, 100, 5, 106, (Run(0, 5, 40), Run(41, 45, 59)),
                                        "r", 0)}
    policy = DefaultReplicationPolicy()
    tp = TopicPartition("A.orders", 0)
    assert map_position(maps, policy, "A", tp, 10) == (15, "")
    assert map_position(maps, policy, "A", tp, 40)[0] == 45  # record 40 never copied: the next copy
    assert exact_or_fail(maps, policy, "A", "g", {tp: 100}) == {tp: 104}
    with pytest.raises(ConnectError, match="covers offsets up to 100, not 150.*mirrorline reconcile"):
        exact_or_fail(maps, policy, "A", "g", {tp: 150})
    with pytest.raises(ConnectError, match="no offset map of orders-1"):
        exact_or_fail(maps, policy, "A", "g", {TopicPartition("A.orders", 1): 0})
