"""Checking a submitted job (job.class, connector, settings) and telling when a connector let partitions go."""

from __future__ import annotations

import pytest

from mirrorline.api.errors import BadRequestError, ConfigError
from mirrorline.connectors.source_mirror.connector import MirrorSourceConnector
from mirrorline.plugins import PluginRegistry
from mirrorline.runtime.jobs.holds import release_pending
from mirrorline.runtime.jobs.spec import prepare_job, resolve_job_class
from mirrorline.runtime.worker import task_config_digest
from mirrorline.storage.configs import MemoryConfigStore, TargetState
from mirrorline.storage.status import MemoryStatusStore, State, Status

MIRROR = {"name": "m", "connector.class": "MirrorSourceConnector", "source.cluster.alias": "A",
          "target.cluster.alias": "B", "source.cluster.bootstrap.servers": "a:9092",
          "target.cluster.bootstrap.servers": "b:9092", "topics": "orders.*", "tasks.max": "2"}


@pytest.fixture(scope="module")
def plugins() -> PluginRegistry:
    return PluginRegistry.discover()


def test_job_class_by_name_simple_or_full_name(plugins):
    assert resolve_job_class(plugins, "backfill").name == "backfill"
    assert resolve_job_class(plugins, "BackfillJob").name == "backfill"
    assert resolve_job_class(plugins, "mirrorline.connectors.mm2.reconcile.ReconcileJob").name == "mm2-reconcile"
    with pytest.raises(BadRequestError, match=r"^job\.class: unknown job class 'x'; installed job classes: .*backfill"):
        resolve_job_class(plugins, "x")
    with pytest.raises(BadRequestError, match=r"^job\.class: required"):
        resolve_job_class(plugins, None)


def test_backfill_of_a_connector_takes_the_flow_from_it(plugins):
    prepared = prepare_job(plugins, {"job.class": "backfill", "connector": "m", "spark.master": "local[2]",
                                     "backfill.topics": "orders-1"}, {"m": MIRROR})
    settings = prepared.prepared.settings
    assert prepared.connector == "m" and settings["backfill.connector.name"] == "m"
    assert settings["source.cluster.alias"] == "A" and settings["topics"] == "orders.*"
    assert "connector.class" not in settings and "tasks.max" not in settings and "name" not in settings
    assert prepared.prepared.client_settings["source"]["bootstrap.servers"] == "a:9092"
    assert prepared.prepared.client_settings["target"]["bootstrap.servers"] == "b:9092"
    with pytest.raises(ConfigError, match=r"^topics: a backfill of connector m takes"):
        prepare_job(plugins, {"job.class": "backfill", "connector": "m", "topics": "x"}, {"m": MIRROR})
    with pytest.raises(ConfigError, match=r"backfill\.from"):
        prepare_job(plugins, {"job.class": "backfill", "connector": "m", "backfill.from": "yesterday"}, {"m": MIRROR})


def test_connector_must_exist_and_be_a_mirror_source(plugins):
    with pytest.raises(BadRequestError, match=r"^connector: there is no connector named 'n'"):
        prepare_job(plugins, {"job.class": "backfill", "connector": "n"}, {"m": MIRROR})
    sink = {"name": "f", "connector.class": "FileStreamSink", "topics": "x", "file": "/tmp/x"}
    with pytest.raises(BadRequestError, match=r"^connector: connector 'f' is a FileStreamSink; job class backfill"):
        prepare_job(plugins, {"job.class": "backfill", "connector": "f"}, {"f": sink})


def test_reconcile_of_a_connector_reads_its_flow(plugins):
    prepared = prepare_job(plugins, {"job.class": "mm2-reconcile", "connector": "m"},
                           {"m": {**MIRROR, "offset-syncs.topic.replication.factor": "1"}})
    settings = prepared.prepared.settings
    assert settings["reconcile.flow"] == "A->B" and settings["clusters"] == "A, B"
    assert settings["A->B.checkpoints.topic.replication.factor"] == "1"
    assert prepared.prepared.client_settings["target"]["bootstrap.servers"] == "b:9092"


def _stores(task_partitions: list[str], statuses: dict[int, Status], state=TargetState.STARTED):
    configs, status_store = MemoryConfigStore(), MemoryStatusStore()
    configs._configs["m"] = MIRROR
    configs._states["m"] = state
    configs._tasks["m"] = [{**MIRROR, "task.assigned.partitions": parts} for parts in task_partitions]
    for task, status in statuses.items():
        status_store._tasks.setdefault("m", {})[task] = status
    return configs, status_store


def test_release_waits_for_task_configs_then_for_every_instance(plugins):
    held = [{"cluster": "A", "topic": "orders", "partition": 1}]
    configs, statuses = _stores(["orders-0,orders-1"], {})
    assert "reassign its tasks" in release_pending(plugins, configs, statuses, "m", held)
    # the new task configs leave orders-1 out, but task 0 still runs the old config
    new_configs = ["orders-0"]
    old_digest = task_config_digest({**MIRROR, "task.assigned.partitions": "orders-0,orders-1"})
    configs, statuses = _stores(new_configs, {0: Status(State.RUNNING, "w", config_digest=old_digest)})
    assert "task m-0 to restart" in release_pending(plugins, configs, statuses, "m", held)
    digest = task_config_digest({**MIRROR, "task.assigned.partitions": "orders-0"})
    configs, statuses = _stores(new_configs, {0: Status(State.RUNNING, "w", config_digest=digest),
                                              1: Status(State.RUNNING, "w", config_digest="x")})
    assert "task m-1 to stop" in release_pending(plugins, configs, statuses, "m", held)
    configs, statuses = _stores(new_configs, {0: Status(State.RUNNING, "w", config_digest=digest),
                                              1: Status(State.UNASSIGNED, "w")})
    assert release_pending(plugins, configs, statuses, "m", held) is None
    # a stopped connector has let everything go; a deleted one holds nothing
    configs, statuses = _stores([], {}, TargetState.STOPPED)
    assert release_pending(plugins, configs, statuses, "m", held) is None
    assert release_pending(plugins, MemoryConfigStore(), MemoryStatusStore(), "m", held) is None


def test_mirror_source_says_which_partitions_a_task_reads():
    partitions = MirrorSourceConnector().task_partitions({**MIRROR, "task.assigned.partitions": "a-b-0,orders-12"})
    assert partitions == [{"cluster": "A", "partition": 0, "topic": "a-b"},
                          {"cluster": "A", "partition": 12, "topic": "orders"}]
