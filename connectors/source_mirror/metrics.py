"""MirrorSourceConnector metrics, with MM2's names and tags, in Prometheus form.

MM2 (JMX, group ``MirrorSourceConnector``, tags source/target/topic/partition, ``topic`` being
the remote topic) has record-count, record-age-ms, replication-latency-ms and byte-count; the
``-rate`` and ``-min/-max/-avg`` variants are what Prometheus computes from these series
(``rate()``, ``*_over_time``). Beyond MM2: ``copied_records`` (by copy path, see
``batch.forwarding.enabled``), ``replication_lag_records`` (records a consumer can be given
that are not replicated yet: transaction markers and aborted records do not count) and ``skipped_topics`` (topics not mirrored, by reason), and two
series for source anomalies MM2 passes over silently: ``records_lost_to_retention`` (records
deleted on the source before they were copied) and ``source_offset_resets`` (times a partition's
position had to be moved to its log start, by reason: ``lost-to-retention`` or
``offsets-went-backwards``, the latter meaning the source topic was deleted and re-created).
``acl_sync_errors`` counts topic ACL sync rounds that failed because the mirror's principal may
not describe ACLs on the source or create them on the target (MM2 only logs these).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

_PREFIX = "kafka_connect_mirror_source_connector_"
_TAGS = ("source", "target", "topic", "partition")

RECORD_COUNT = Counter(_PREFIX + "record_count", "Records replicated and acknowledged by the target.", _TAGS)
BYTE_COUNT = Counter(_PREFIX + "byte_count", "Value bytes replicated (measured at poll, as MM2); when batches are "
                     "forwarded whole, the batches' bytes as fetched (compressed as on the source).", _TAGS)
COPIED_RECORDS = Counter(_PREFIX + "copied_records",
                         "Records handed to the target at poll, by path: batch (record batches forwarded whole), "
                         "rebuilt (batches re-encoded: small batches merged, offset gaps, LogAppendTime, a batch "
                         "split by the start position), record (copied record by record).", ("source", "target", "path"))
RECORD_AGE_MS = Gauge(_PREFIX + "record_age_ms", "Age of the last polled record: now - its timestamp.", _TAGS)
REPLICATION_LATENCY_MS = Gauge(_PREFIX + "replication_latency_ms",
                               "Now - source record timestamp, when the target acknowledged it.", _TAGS)
REPLICATION_LAG_RECORDS = Gauge(_PREFIX + "replication_lag_records",
                                "Records on the source not yet replicated: those a consumer can still be given "
                                "(last stable offset under read_committed, else high watermark, minus the fetch "
                                "position) plus those fetched and not yet acknowledged by the target. Transaction "
                                "markers and aborted records are not counted.", _TAGS)
SKIPPED_TOPICS = Counter(_PREFIX + "skipped_topics", "Source topics not mirrored, by reason.",
                         ("source", "target", "reason"))
RECORDS_LOST_TO_RETENTION = Counter(
    _PREFIX + "records_lost_to_retention",
    "Source records deleted (retention, DeleteRecords) before they were replicated: never copied.", _TAGS)
SOURCE_OFFSET_RESETS = Counter(
    _PREFIX + "source_offset_resets",
    "Times a source partition's position was out of its log and replication resumed at the log start, "
    "by reason (lost-to-retention, offsets-went-backwards).", _TAGS + ("reason",))
ACL_SYNC_ERRORS = Counter(
    _PREFIX + "acl_sync_errors",
    "Topic ACL sync rounds that failed, by reason (source-describe-denied: no DESCRIBE on the source cluster; "
    "target-alter-denied: no ALTER on the target cluster).", ("source", "target", "reason"))
