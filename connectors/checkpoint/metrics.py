"""MirrorCheckpointConnector metrics in Prometheus form.

MM2's ``checkpoint-latency-ms`` (tags source/target/group/topic/partition; kept separate per
partition, unlike MM2's shared sensor; with ``replication.metrics.level=topic`` one series per
group and topic, the partition label empty, holding the latency of its latest checkpoint), plus per group: the age of its newest checkpoint and
how many records it would re-read after failing over now (an estimate from the offset syncs:
records between the last known sync and the group's position, minus the +1 the translation
allows).
"""

from __future__ import annotations

from prometheus_client import Gauge

_PREFIX = "kafka_connect_mirror_checkpoint_connector_"

CHECKPOINT_LATENCY_MS = Gauge(_PREFIX + "checkpoint_latency_ms",
                              "Now - checkpoint timestamp, when the target acknowledged the checkpoint.",
                              ("source", "target", "group", "topic", "partition"))
CHECKPOINT_AGE_SECONDS = Gauge(_PREFIX + "checkpoint_age_seconds",
                               "Seconds since this group's newest checkpoint was written.",
                               ("source", "target", "group"))
FAILOVER_REREAD_RECORDS = Gauge(_PREFIX + "failover_reread_records",
                                "Estimated records the group would read again if it failed over now.",
                                ("source", "target", "group"))
