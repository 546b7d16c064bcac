"""MirrorCheckpointConnector settings: MM2's names and defaults (reference mm2.md §4 and §6.7)."""

from __future__ import annotations

from mirrorline.api import ConfigDef, ConfigKey, Importance, Range, RegexList, Type

from mirrorline.connectors.mirror_client.config import COMMON_CONFIG_DEF, REPLICATION_METRICS_LEVEL_KEY
from mirrorline.connectors.mirror_client.filters import GROUPS_EXCLUDE_DEFAULT, GROUPS_INCLUDE_DEFAULT

GROUP = "MirrorCheckpoint"

TASK_ASSIGNED_GROUPS = "task.assigned.groups"
TASK_INDEX = "task.index"

CHECKPOINT_CONFIG_DEF = COMMON_CONFIG_DEF.merged(ConfigDef([
    REPLICATION_METRICS_LEVEL_KEY,
    ConfigKey("groups", Type.LIST, default=GROUPS_INCLUDE_DEFAULT, validator=RegexList(), importance=Importance.HIGH,
              group=GROUP, doc="Consumer groups to checkpoint: comma-separated regular expressions (full match)."),
    ConfigKey("groups.exclude", Type.LIST, default=GROUPS_EXCLUDE_DEFAULT, validator=RegexList(),
              importance=Importance.HIGH, group=GROUP, doc="Consumer groups never to checkpoint (full-match regexes)."),
    ConfigKey("refresh.groups.enabled", Type.BOOLEAN, default="true", importance=Importance.LOW, group=GROUP,
              doc="Periodically look for new consumer groups on the source."),
    ConfigKey("refresh.groups.interval.seconds", Type.LONG, default=600, validator=Range(min=1),
              importance=Importance.LOW, group=GROUP, doc="How often to look for new consumer groups."),
    ConfigKey("emit.checkpoints.enabled", Type.BOOLEAN, default="true", importance=Importance.LOW, group=GROUP,
              doc="Write translated consumer offsets to the checkpoints topic on the target."),
    ConfigKey("emit.checkpoints.interval.seconds", Type.LONG, default=60, validator=Range(min=1),
              importance=Importance.LOW, group=GROUP, doc="How often checkpoints are written."),
    ConfigKey("sync.group.offsets.enabled", Type.BOOLEAN, default="false", importance=Importance.LOW, group=GROUP,
              doc="Also commit translated offsets to the same group on the target, while that group has no "
                  "active member there; never moves a group's offset backwards."),
    ConfigKey("sync.group.offsets.interval.seconds", Type.LONG, default=60, validator=Range(min=1),
              importance=Importance.LOW, group=GROUP, doc="How often group offsets are synced to the target."),
    ConfigKey("checkpoints.topic.replication.factor", Type.INT, default=3, validator=Range(min=-1),
              importance=Importance.LOW, group=GROUP, doc="Replication factor of the checkpoints topic."),
    ConfigKey("emit.offset-syncs.enabled", Type.BOOLEAN, default="true", importance=Importance.LOW, group=GROUP,
              doc="Checkpoints are translated through the source connector's offset syncs: with false (KIP-1031) "
                  "the connector refuses to run, and mirrorline mm2 does not create it (one log line)."),
]))
