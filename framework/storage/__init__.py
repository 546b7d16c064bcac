"""Where the runtime keeps state: source offsets, connector configs, statuses.

Three narrow interfaces, each with an in-memory implementation (tests, standalone
configs and statuses) and, for offsets, a file implementation (standalone mode). Kafka
topic-backed implementations for the distributed mode implement the same interfaces, so
connectors and the herder never know which one they use.
"""

from mirrorline.storage.configs import ConfigStore, MemoryConfigStore, TargetState
from mirrorline.storage.kafka_configs import KafkaConfigStore
from mirrorline.storage.kafka_log import KafkaBasedLog
from mirrorline.storage.kafka_offsets import KafkaOffsetStore
from mirrorline.storage.kafka_status import KafkaStatusStore
from mirrorline.storage.offsets import FileOffsetStore, MemoryOffsetStore, OffsetStore, partition_key
from mirrorline.storage.status import MemoryStatusStore, State, Status, StatusStore

__all__ = ["ConfigStore", "FileOffsetStore", "KafkaBasedLog", "KafkaConfigStore", "KafkaOffsetStore",
           "KafkaStatusStore", "MemoryConfigStore", "MemoryOffsetStore", "MemoryStatusStore", "OffsetStore", "State",
           "Status", "StatusStore", "TargetState", "partition_key"]
