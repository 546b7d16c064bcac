"""Which source partitions jobs hold, and whether a connector has let go of them.

A job holds the partitions it writes (fixed when it is accepted) from then until it has handed
them back: its status is finished and ``released`` (it succeeded, or was cancelled and handed
over what it copied). A job that failed keeps them until it is removed or succeeds on a rerun,
so its connector never streams into a partition a backfill half-copied.

Two jobs never hold one partition (of the same connector, or, for jobs bound to none, the same
source partition) at once: the second is refused naming the first.

A job bound to a running connector starts only once the connector let its partitions go:
every task config of the connector leaves them out (the connector says which partitions a task
config reads: ``SourceConnector.task_partitions``) and every task instance runs its current
config (task statuses carry a digest of the config they run). A STOPPED connector has let go of
everything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mirrorline.api.connector import SourceConnector
from mirrorline.api.errors import ConnectError, NotFoundError
from mirrorline.plugins import PluginRegistry
from mirrorline.runtime.worker import task_config_digest
from mirrorline.storage.configs import ConfigStore, TargetState
from mirrorline.storage.jobs import JobConfigs, JobRecord, JobStatus, JobStatuses
from mirrorline.storage.offsets import partition_key
from mirrorline.storage.status import State, StatusStore


class PartitionsHeldError(ConnectError):
    """The partitions a job would write are held by another job (HTTP 409)."""

    http_status = 409


def holds(record: JobRecord, status: JobStatus | None) -> bool:
    """Whether ``record``'s job still holds its partitions."""
    return bool(record.partitions) and not (status is not None and status.state.finished and status.released)


def _key(partition: Mapping[str, Any]) -> str:
    return partition_key("", partition)


def describe(partition: Mapping[str, Any]) -> str:
    """A source partition for people: ``topic-partition`` when it has both keys, else its JSON."""
    if "topic" in partition and "partition" in partition:
        return f"{partition['topic']}-{partition['partition']}"
    return _key(partition)[4:-1]


def held_partitions(configs: JobConfigs, statuses: JobStatuses, connector: str) -> list[tuple[dict[str, Any], str]]:
    """``(source partition, job)`` for every partition of ``connector`` a job holds."""
    out = []
    for name, record in configs.jobs().items():
        if record.connector == connector and holds(record, statuses.get(name)):
            out.extend((dict(p), name) for p in record.partitions)
    return out


def check_conflicts(configs: JobConfigs, statuses: JobStatuses, connector: str | None,
                    partitions: Iterable[Mapping[str, Any]], field: str = "partitions") -> None:
    """PartitionsHeldError naming the holding job when another job holds any of ``partitions``."""
    wanted = {_key(p): p for p in partitions}
    for name, record in configs.jobs().items():
        status = statuses.get(name)
        if record.connector != connector or not holds(record, status):
            continue
        taken = [wanted[k] for k in (_key(p) for p in record.partitions) if k in wanted]
        if taken:
            shown = ", ".join(sorted(describe(p) for p in taken)[:10]) + (" ..." if len(taken) > 10 else "")
            state = status.state.value if status is not None else "PENDING"
            raise PartitionsHeldError(f"{field}: job {name!r} ({state}) holds {len(taken)} of them ({shown}); "
                                      f"wait for it to finish, or delete it")


def release_pending(plugins: PluginRegistry, config_store: ConfigStore, status_store: StatusStore, connector: str,
                    partitions: Iterable[Mapping[str, Any]]) -> str | None:
    """None once ``connector`` reads none of ``partitions`` anywhere; otherwise what is still awaited."""
    config = config_store.connectors().get(connector)
    if config is None:
        return None
    wanted = {_key(p) for p in partitions}
    if not wanted:
        return None
    task_configs = config_store.task_configs(connector)
    stopped = config_store.target_state(connector) == TargetState.STOPPED
    if task_configs and not stopped:
        try:
            instance = plugins.connector_class(str(config.get("connector.class", "")))()
        except NotFoundError:
            return f"connector {connector}'s class is not installed on this worker"
        reader = instance.task_partitions if isinstance(instance, SourceConnector) else None
        for index, task_config in enumerate(task_configs):
            read = reader(task_config) if reader is not None else None
            if read is None:
                return (f"connector {connector} cannot hand partitions to a job while it runs: stop it "
                        f"(PUT /connectors/{connector}/stop) and the job starts")
            if any(_key(p) in wanted for p in read):
                return f"waiting for connector {connector} to reassign its tasks without the job's partitions"
    digests = [task_config_digest(c) for c in task_configs] if not stopped else []
    for task, status in status_store.tasks(connector).items():
        if status.state not in (State.RUNNING, State.PAUSED, State.RESTARTING):
            continue
        if task >= len(digests):
            return f"waiting for task {connector}-{task} to stop"
        if status.config_digest != digests[task]:
            return f"waiting for task {connector}-{task} to restart with its new config"
    return None
