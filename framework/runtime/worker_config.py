"""The worker's own settings (Kafka Connect's ``WorkerConfig`` / ``StandaloneConfig`` names)."""

from __future__ import annotations

from mirrorline.api.config import ConfigDef, ConfigKey, Importance, OneOf, Range, Type, ValidString
from mirrorline.runtime.converters import converter_keys

#: Prefix of the settings that configure TLS of an ``https://`` REST listener only. As in Connect,
#: it is all or nothing: once any ``listeners.https.*`` setting is given, the worker's ``ssl.*``
#: settings are ignored for the REST API (they still configure the worker's Kafka clients).
LISTENER_HTTPS_PREFIX = "listeners.https."

#: The TLS settings of the REST API: (name after ``ssl.``, type, default, validator, doc).
_REST_SSL_SETTINGS = (
    ("keystore.location", Type.STRING, None, None,
     "Key store holding the REST server's private key and certificate chain (https listeners)."),
    ("keystore.password", Type.PASSWORD, None, None, "Password of the key store."),
    ("keystore.type", Type.STRING, "JKS", OneOf(("JKS", "PKCS12", "PEM"), ignore_case=True),
     "Format of the key store: JKS (needs the pyjks package; a PKCS12 file is also read when JKS is "
     "set, as Java does), PKCS12 or PEM (private key and certificates in one file)."),
    ("key.password", Type.PASSWORD, None, None,
     "Password of the private key in the key store (JKS: defaults to the key store password; PEM: the "
     "encrypted key's password)."),
    ("truststore.location", Type.STRING, None, None,
     "Trust store with the CA certificates that client certificates (and, when forwarding, other "
     "workers' certificates) are checked against; unset uses the system's CAs."),
    ("truststore.password", Type.PASSWORD, None, None, "Password of the trust store."),
    ("truststore.type", Type.STRING, "JKS", OneOf(("JKS", "PKCS12", "PEM"), ignore_case=True),
     "Format of the trust store: JKS (needs pyjks; PKCS12 files are read too), PKCS12 or PEM."),
    ("client.auth", Type.STRING, "none", OneOf(("required", "requested", "none"), ignore_case=True),
     "Client certificates on the https REST listener: required (a connection without a certificate "
     "the trust store vouches for is refused during the TLS handshake), requested (checked when sent) "
     "or none."),
    ("endpoint.identification.algorithm", Type.STRING, "https", None,
     "Host-name check of the other worker's certificate when a request is forwarded over https; "
     "empty turns it off."),
)


def _rest_ssl_keys(prefix: str, scope: str) -> list[ConfigKey]:
    return [ConfigKey(f"{prefix}ssl.{suffix}", type_, default=default, validator=validator,
                      importance=Importance.LOW, doc=f"{doc} {scope}")
            for suffix, type_, default, validator, doc in _REST_SSL_SETTINGS]


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
              importance=Importance.LOW, doc="How long a connector's or task's stop may take (tasks stop in parallel); past it the "
                  "instance is abandoned and the worker goes on. Bounds shutdown on SIGTERM too."),
    ConfigKey("restart.on.failure.enable", Type.BOOLEAN, default="true", importance=Importance.MEDIUM,
              doc="Restart failed connectors and tasks by themselves, with exponential back-off (beyond "
                  "Connect, which waits for POST .../restart). Each restart is counted in "
                  "kafka_connect_task_restarts_total / kafka_connect_connector_restarts_total and shown "
                  "in status as \"restarts\"."),
    ConfigKey("restart.backoff.initial.ms", Type.LONG, default=1000, validator=Range(min=0),
              importance=Importance.LOW, doc="Delay before the first automatic restart of a failed "
                                             "connector or task; it doubles with each failure in a row."),
    ConfigKey("restart.backoff.max.ms", Type.LONG, default=60000, validator=Range(min=0),
              importance=Importance.LOW,
              doc="Longest delay between automatic restarts. An instance that ran this long before "
                  "failing again starts over from restart.backoff.initial.ms."),
    ConfigKey("start.timeout.ms", Type.LONG, default=60000, validator=Range(min=1), importance=Importance.LOW,
              doc="How long a connector's or task's start() may take before it is marked FAILED (beyond "
                  "Connect, which waits without bound)."),
    ConfigKey("task.stall.timeout.ms", Type.LONG, default=60000, validator=Range(min=0),
              importance=Importance.LOW,
              doc="Stall watchdog: a task that reports records waiting upstream but has had none "
                  "acknowledged for this long is flagged in its status (\"warnings\") and in "
                  "kafka_connect_task_stalled. 0 turns the watchdog off."),
    ConfigKey("rest.request.max.bytes", Type.LONG, default=1048576, validator=Range(min=1024),
              importance=Importance.LOW,
              doc="Largest REST request body accepted; a larger one is refused with 413 before anything is "
                  "written (beyond Connect)."),
    ConfigKey("topic.creation.enable", Type.BOOLEAN, default="true", importance=Importance.LOW,
              doc="Whether to allow automatic creation of topics used by source connectors, when source connectors "
                  "are configured with `topic.creation.` properties. Each task will use an admin client to create "
                  "its topics and will not depend on the Kafka brokers to create topics automatically (Connect's "
                  "setting, KIP-158; the admin client takes bootstrap.servers, admin.* and the connector's "
                  "admin.override.* settings). A source connector without topic.creation.* settings, or any source "
                  "connector when this is false, writes with a producer that lets the broker's "
                  "auto.create.topics.enable decide, as Connect's does; connectors that create their own topics "
                  "(the MirrorMaker 2 connectors) never let a broker create one."),
    ConfigKey("topic.tracking.enable", Type.BOOLEAN, default="true", importance=Importance.LOW,
              doc="Record the topics each connector writes to (GET /connectors/{name}/topics)."),
    ConfigKey("topic.tracking.allow.reset", Type.BOOLEAN, default="true", importance=Importance.LOW,
              doc="Allow PUT /connectors/{name}/topics/reset."),
    ConfigKey("plugin.path", Type.LIST, default="", importance=Importance.LOW,
              doc="Accepted for compatibility; mirrorline finds plugins through installed entry points."),
    ConfigKey("client.id", Type.STRING, default="mirrorline", importance=Importance.LOW,
              doc="Prefix of the client ids of the worker's Kafka clients."),
    ConfigKey("rest.extension.classes", Type.LIST, default="", importance=Importance.LOW,
              doc="REST extensions, as Connect's. The one known is "
                  "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension, which "
                  "turns on HTTP Basic authentication of every request; any other name is a start-up error."),
    ConfigKey("rest.basic.auth.credentials.file", Type.STRING, default=None, importance=Importance.MEDIUM,
              doc="Credentials for Basic authentication, in the format of Connect's PropertyFileLoginModule "
                  "file (one 'user: password' or 'user=password' line per user). Unset: the file named by the "
                  "KafkaConnect entry of the JAAS file given with -Djava.security.auth.login.config=... in "
                  "KAFKA_OPTS is used, as in Connect."),
    ConfigKey("rest.metrics.auth.enable", Type.BOOLEAN, default="true", importance=Importance.LOW,
              doc="Whether GET /metrics needs the same authentication as the rest of the REST API. false "
                  "leaves it open for a Prometheus scraper (TLS client-certificate checks still apply, "
                  "as they happen before the request is read)."),
    *converter_keys(worker=True),  # key.converter, value.converter, header.converter (ByteArrayConverter)
    *_rest_ssl_keys("", "Used by the REST API's https listeners unless a listeners.https.ssl.* setting is "
                        "given; also configures the worker's Kafka clients when they use SSL."),
    *_rest_ssl_keys(LISTENER_HTTPS_PREFIX, "For the https REST listener only; once any listeners.https.* "
                                           "setting is given the worker's ssl.* settings are ignored for REST."),
])

#: Worker settings starting with this prefix configure every task's producer.
PRODUCER_PREFIX = "producer."

#: The worker setting that turns on exactly-once source support (KIP-618), and its values.
EXACTLY_ONCE_SOURCE_SUPPORT = "exactly.once.source.support"
EXACTLY_ONCE_SOURCE_SUPPORT_VALUES = ("disabled", "preparing", "enabled")

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
    ConfigKey(EXACTLY_ONCE_SOURCE_SUPPORT, Type.STRING, default="disabled", importance=Importance.HIGH,
              validator=ValidString(EXACTLY_ONCE_SOURCE_SUPPORT_VALUES),
              doc="Whether to enable exactly-once support for source connectors in the cluster by using transactions "
                  "to write source records and their source offsets, and by proactively fencing out old task "
                  "generations before bringing up new ones. To enable exactly-once source support on a new cluster, "
                  "set this property to 'enabled'. To enable support on an existing cluster, first set to "
                  "'preparing' on every worker in the cluster, then set to 'enabled'. A rolling upgrade may be used "
                  "for both changes. (Kafka Connect's setting; see docs/exactly-once.md.)"),
    ConfigKey("inter.worker.key.ttl.ms", Type.LONG, default=3600000, validator=Range(min=1000, max=2**31 - 1),
              importance=Importance.LOW,
              doc="How long the session key that signs requests forwarded between workers is used before the "
                  "leader writes a new one to the config topic (Connect's setting and default)."),
]))
