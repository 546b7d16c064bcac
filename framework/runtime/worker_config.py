"""The worker's own settings (Kafka Connect's ``WorkerConfig`` / ``StandaloneConfig`` names)."""

from __future__ import annotations

from framework.api.config import ConfigDef, ConfigKey, Importance, Range, Type

WORKER_CONFIG_DEF = ConfigDef([
    ConfigKey("bootstrap.servers", Type.LIST, default="localhost:9092", importance=Importance.HIGH,
              doc="Kafka cluster the worker writes source records to (host:port list)."),
    ConfigKey("listeners", Type.LIST, default="http://:8083", importance=Importance.LOW,
              doc="REST API listeners, as Connect's (e.g. http://127.0.0.1:8083; port 0 picks a free one)."),
    ConfigKey("rest.advertised.host.name", Type.STRING, default=None, importance=Importance.LOW,
              doc="Host name other workers and clients should use; defaults to the listener's host."),
    ConfigKey("offset.storage.file.filename", Type.STRING, default="", importance=Importance.HIGH,
              doc="Standalone mode: file in which source offsets are stored. Empty keeps them in memory "
                  "(lost on restart)."),
    ConfigKey("offset.flush.interval.ms", Type.LONG, default=60000, validator=Range(min=1),
              importance=Importance.LOW, doc="How often tasks' source offsets are stored."),
    ConfigKey("offset.flush.timeout.ms", Type.LONG, default=5000, validator=Range(min=1),
              importance=Importance.LOW,
              doc="How long a task waits on stop for in-flight records before storing offsets."),
    ConfigKey("task.shutdown.graceful.timeout.ms", Type.LONG, default=5000, validator=Range(min=0),
              importance=Importance.LOW, doc="How long to wait for tasks to stop gracefully."),
    ConfigKey("topic.tracking.enable", Type.BOOLEAN, default="true", importance=Importance.LOW,
              doc="Record the topics each connector writes to (GET /connectors/{name}/topics)."),
    ConfigKey("topic.tracking.allow.reset", Type.BOOLEAN, default="true", importance=Importance.LOW,
              doc="Allow PUT /connectors/{name}/topics/reset."),
    ConfigKey("plugin.path", Type.LIST, default="", importance=Importance.LOW,
              doc="Accepted for compatibility; mirrorline finds plugins through installed entry points."),
    ConfigKey("client.id", Type.STRING, default="mirrorline", importance=Importance.LOW,
              doc="Prefix of the client ids of the worker's Kafka clients."),
])

#: Worker settings starting with this prefix configure every task's producer.
PRODUCER_PREFIX = "producer."

#: Settings of a distributed worker (Connect's ``DistributedConfig`` names and defaults), on top of
#: the common ones. Topic partitions and replication factors are read by the Kafka-backed stores.
DISTRIBUTED_CONFIG_DEF = WORKER_CONFIG_DEF.merged(ConfigDef([
    ConfigKey("group.id", Type.STRING, importance=Importance.HIGH,
              doc="Workers with the same group.id form one cluster and share its connectors."),
    ConfigKey("config.storage.topic", Type.STRING, importance=Importance.HIGH,
              doc="Compacted, single-partition topic holding connector configs, task configs and target states."),
    ConfigKey("offset.storage.topic", Type.STRING, importance=Importance.HIGH,
              doc="Compacted topic holding source offsets."),
    ConfigKey("status.storage.topic", Type.STRING, importance=Importance.HIGH,
              doc="Compacted topic holding connector and task statuses."),
    ConfigKey("config.storage.replication.factor", Type.INT, default=3, importance=Importance.LOW,
              doc="Replication factor of the config topic when the worker creates it."),
    ConfigKey("offset.storage.replication.factor", Type.INT, default=3, importance=Importance.LOW,
              doc="Replication factor of the offsets topic when the worker creates it."),
    ConfigKey("offset.storage.partitions", Type.INT, default=25, validator=Range(min=1), importance=Importance.LOW,
              doc="Partitions of the offsets topic when the worker creates it."),
    ConfigKey("status.storage.replication.factor", Type.INT, default=3, importance=Importance.LOW,
              doc="Replication factor of the status topic when the worker creates it."),
    ConfigKey("status.storage.partitions", Type.INT, default=5, validator=Range(min=1), importance=Importance.LOW,
              doc="Partitions of the status topic when the worker creates it."),
    ConfigKey("session.timeout.ms", Type.INT, default=10000, validator=Range(min=1), importance=Importance.HIGH,
              doc="How long the group waits for a silent worker before giving its connectors and tasks to others."),
    ConfigKey("heartbeat.interval.ms", Type.INT, default=3000, validator=Range(min=1), importance=Importance.HIGH,
              doc="How often a worker tells the group it is alive (well under session.timeout.ms)."),
    ConfigKey("rebalance.timeout.ms", Type.INT, default=60000, validator=Range(min=1), importance=Importance.HIGH,
              doc="How long workers have to stop what they give up and rejoin during a rebalance."),
]))
