"""Real Apache Kafka clusters on loopback, for the demo, the tests and the benchmarks.

The broker is Apache Kafka itself, resolved from its Maven Central artifacts (see
:mod:`mirrorline.localkafka.artifacts`) and run in KRaft mode, one combined broker+controller
node per cluster. Nothing here is used by the worker at run time.
"""

from mirrorline.localkafka.artifacts import KAFKA_VERSION, resolve_kafka_classpath
from mirrorline.localkafka.cluster import ClusterSpec, LocalCluster
from mirrorline.localkafka.errors import LocalKafkaError
from mirrorline.localkafka.manager import LocalKafka

__all__ = [
    "KAFKA_VERSION",
    "ClusterSpec",
    "LocalCluster",
    "LocalKafka",
    "LocalKafkaError",
    "resolve_kafka_classpath",
]
