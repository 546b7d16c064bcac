"""Where the runtime keeps state: source offsets, connector configs, statuses.

Three narrow interfaces, each with an in-memory implementation (tests, standalone
configs and statuses) and, for offsets, a file implementation (standalone mode). Kafka
topic-backed implementations for the distributed mode implement the same interfaces, so
connectors and the herder never know which one they use.
"""

from framework.storage.configs import ConfigStore, MemoryConfigStore, TargetState
from framework.storage.kafka_configs import KafkaConfigStore
from framework.storage.kafka_log import KafkaBasedLog
from framework.storage.kafka_offsets import KafkaOffsetStore
from framework.storage.kafka_status import KafkaStatusStore
from framework.storage.offsets import FileOffsetStore, MemoryOffsetStore, OffsetStore, partition_key
from framework.storage.status import MemoryStatusStore, State, Status, StatusStore

__all__ = ["ConfigStore", "FileOffsetStore", "KafkaBasedLog", "KafkaConfigStore", "KafkaOffsetStore",
           "KafkaStatusStore", "MemoryConfigStore", "MemoryOffsetStore", "MemoryStatusStore", "OffsetStore", "State",
           "Status", "StatusStore", "TargetState", "partition_key"]
