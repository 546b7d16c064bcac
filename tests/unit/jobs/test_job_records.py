"""Job records in the config and status topics, read back as a Kafka store reads them, and the holds rules."""

from __future__ import annotations

import json

import pytest

from mirrorline.runtime.jobs.holds import PartitionsHeldError, check_conflicts, describe, held_partitions, holds
from mirrorline.storage.jobs import (JOB_CONFIG_PREFIX, JOB_STATE_PREFIX, JobConfigs, JobRecord, JobState, JobStatus,
                                     JobStatuses, JobTarget)
from mirrorline.storage.kafka_jobs import KafkaJobConfigs, KafkaJobStatuses

P0 = {"cluster": "A", "partition": 0, "topic": "orders"}
P1 = {"cluster": "A", "partition": 1, "topic": "orders"}


def test_config_record_round_trip_and_target_state():
    record = JobRecord("bf", {"job.class": "backfill", "connector": "m"}, "m", (P0, P1), 123, "rest")
    configs = KafkaJobConfigs(store=None)
    seen = []
    configs.listener = lambda kind, name: seen.append((kind, name))
    configs.on_record(JOB_STATE_PREFIX + "bf", {"state": "STARTED"})
    configs.on_record(JOB_CONFIG_PREFIX + "bf", json.loads(json.dumps(record.value())))
    assert configs.job("bf") == record and configs.target("bf") == JobTarget.STARTED
    configs.on_record(JOB_STATE_PREFIX + "bf", {"state": "CANCELLED"})
    assert configs.target("bf") == JobTarget.CANCELLED
    # malformed records are skipped, not applied
    configs.on_record(JOB_CONFIG_PREFIX + "bad", {"properties": "nope"})
    configs.on_record(JOB_STATE_PREFIX + "bf", {"state": "WHATEVER"})
    assert "bad" not in configs.jobs() and configs.target("bf") == JobTarget.CANCELLED
    configs.on_record(JOB_CONFIG_PREFIX + "bf", None)
    configs.on_record(JOB_STATE_PREFIX + "bf", None)
    assert configs.jobs() == {} and configs.target("bf") == JobTarget.STARTED
    assert seen == [("job_state", "bf"), ("job", "bf"), ("job_state", "bf"), ("job", "bf")]


def test_status_record_round_trip_and_listener_on_state_changes_only():
    statuses = KafkaJobStatuses(store=None)
    seen = []
    statuses.listener = lambda kind, name: seen.append((kind, name))
    running = JobStatus(JobState.RUNNING, "w1:8083", 3, 2, progress={"completed": 5, "total": 10})
    statuses.on_record("mirrorline-job-status-bf", json.loads(json.dumps(running.value())))
    assert statuses.get("bf") == running
    statuses.on_record("mirrorline-job-status-bf", {**running.value(), "progress": {"completed": 6, "total": 10}})
    statuses.on_record("mirrorline-job-status-bf", {**running.value(), "state": "SUCCEEDED", "released": True})
    statuses.on_record("mirrorline-job-status-bf", {"state": "NOT-A-STATE"})
    assert statuses.get("bf").state == JobState.SUCCEEDED and statuses.get("bf").released
    statuses.on_record("mirrorline-job-status-bf", None)
    assert statuses.get("bf") is None
    assert seen == [("job_status", "bf")] * 3  # progress alone is not a change the holds care about


def test_java_connect_prefixes_do_not_match_job_keys():
    """Java's config store dispatches by prefix; ours must match none of them (it then skips the record)."""
    java = ("connector-", "task-", "commit-", "target-state-", "session-key", "restart-connector-",
            "tasks-fencing-", "logger-cluster-", "status-connector-", "status-task-", "status-topic-")
    for key in ("mirrorline-job-config-x", "mirrorline-job-state-x", "mirrorline-job-status-x"):
        assert not key.startswith(java)


def test_holds_and_conflicts():
    configs, statuses = JobConfigs(), JobStatuses()
    configs._apply_job("a", JobRecord("a", {}, "m", (P0,), 1))
    configs._apply_job("b", JobRecord("b", {}, "m", (P1,), 2))
    configs._apply_job("other", JobRecord("other", {}, "n", (P0,), 3))
    assert held_partitions(configs, statuses, "m") == [(P0, "a"), (P1, "b")]
    with pytest.raises(PartitionsHeldError, match=r"^partitions: job 'a' \(PENDING\) holds 1 of them \(orders-0\)"):
        check_conflicts(configs, statuses, "m", [P0, {"cluster": "A", "partition": 9, "topic": "orders"}])
    check_conflicts(configs, statuses, "z", [P0])  # another connector's partitions are another matter
    # a finished job that handed its partitions back holds nothing; a failed one keeps them
    statuses._apply("a", JobStatus(JobState.SUCCEEDED, released=True))
    statuses._apply("b", JobStatus(JobState.FAILED))
    assert not holds(configs.job("a"), statuses.get("a")) and holds(configs.job("b"), statuses.get("b"))
    assert held_partitions(configs, statuses, "m") == [(P1, "b")]
    check_conflicts(configs, statuses, "m", [P0])
    assert describe(P1) == "orders-1" and describe({"file": "x"}) == '{"file":"x"}'
