"""Distributed-worker metrics in Prometheus form, named after Connect's worker metric groups.

Connect's ``connect-worker-metrics`` (connector-count, task-count) and
``connect-worker-rebalance-metrics`` (epoch, completed-rebalances-total, leader-name) become
``kafka_connect_worker_*`` series tagged with ``worker_id`` (several workers may share a
process, e.g. MM2 mode runs one per flow). Beyond Connect: ``kafka_connect_worker_task_assigned``
is 1 for every task a worker runs, so a dashboard shows which worker runs which task.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge

from mirrorline.api.records import ConnectorTaskId
from mirrorline.runtime.distributed.assignment import Assignment

_PREFIX = "kafka_connect_worker_"

CONNECTOR_COUNT = Gauge(_PREFIX + "connector_count", "Connectors assigned to this worker.", ("worker_id",))
TASK_COUNT = Gauge(_PREFIX + "task_count", "Tasks assigned to this worker.", ("worker_id",))
EPOCH = Gauge(_PREFIX + "rebalance_epoch", "Group generation of this worker's latest assignment.", ("worker_id",))
LEADER = Gauge(_PREFIX + "rebalance_leader", "1 while this worker leads its group.", ("worker_id",))
COMPLETED_REBALANCES = Counter(_PREFIX + "rebalance_completed_rebalances", "Assignments this worker applied.",
                               ("worker_id",))
TASK_ASSIGNED = Gauge(_PREFIX + "task_assigned", "1 for each task this worker runs.",
                      ("worker_id", "connector", "task"))


def record_assignment(worker_id: str, assignment: Assignment, generation: int, leader: bool) -> None:
    """Record an applied assignment."""
    CONNECTOR_COUNT.labels(worker_id).set(len(assignment.connectors))
    TASK_COUNT.labels(worker_id).set(len(assignment.tasks))
    EPOCH.labels(worker_id).set(generation)
    LEADER.labels(worker_id).set(1 if leader else 0)
    COMPLETED_REBALANCES.labels(worker_id).inc()


def task_assigned(worker_id: str, task_id: ConnectorTaskId, running: bool) -> None:
    """Mark a task as run (or no longer run) by ``worker_id``."""
    if running:
        TASK_ASSIGNED.labels(worker_id, task_id.connector, str(task_id.task)).set(1)
    else:
        try:
            TASK_ASSIGNED.remove(worker_id, task_id.connector, str(task_id.task))
        except KeyError:
            pass


def forget_worker(worker_id: str) -> None:
    """Drop a stopped worker's series."""
    for gauge in (CONNECTOR_COUNT, TASK_COUNT, EPOCH, LEADER):
        try:
            gauge.remove(worker_id)
        except KeyError:
            pass
    for labels in [s.labels for m in TASK_ASSIGNED.collect() for s in m.samples
                   if s.labels.get("worker_id") == worker_id]:
        task_assigned(worker_id, ConnectorTaskId(labels["connector"], int(labels["task"])), False)
