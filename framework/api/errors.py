"""The error hierarchy shared by plugins and the runtime.

Behaviour travels as class attributes, as aiokafka's ``KafkaError.retriable`` does: the
worker's task loop retries an error whose ``retriable`` is true (with back-off) and fails the
task on anything else, recording the trace in the status store where
``GET /connectors/{name}/status`` shows it. The REST layer maps ``http_status`` to the
response code, so a plugin raising ``ConfigError`` from ``start`` is reported as 400 when the
connector is created over REST.
"""

from __future__ import annotations


class ConnectError(Exception):
    """Base of every error the framework raises or understands."""

    retriable: bool = False
    http_status: int = 500


class RetriableError(ConnectError):
    """A transient failure (broker unavailable, timeout): the runtime retries the same call later."""

    retriable = True


class ConfigError(ConnectError):
    """A configuration is invalid; the message names the key and the problem."""

    http_status = 400


class BadRequestError(ConnectError):
    """A request cannot be carried out as asked (wrong state, malformed input)."""

    http_status = 400


class NotFoundError(ConnectError):
    """A named connector, task, plugin or logger does not exist."""

    http_status = 404


class ForbiddenError(ConnectError):
    """The request is refused by configuration (e.g. topic tracking disabled)."""

    http_status = 403


class AlreadyExistsError(ConnectError):
    """A connector with that name already exists."""

    http_status = 409


class RebalanceInProgressError(ConnectError):
    """The worker cluster is rebalancing; retry the request shortly (HTTP 409, as Connect)."""

    http_status = 409
    retriable = True


class PartitionNotAvailableError(RetriableError):
    """A record's topic or partition is still not in the producer's metadata after ``max.block.ms``.

    Usually a topic that has not been created or grown yet, or a partition without a leader.
    ``topic`` and ``partition`` (None when the whole topic is unknown) name what was awaited.
    """

    def __init__(self, topic: str, partition: int | None, message: str):
        super().__init__(message)
        self.topic = topic
        self.partition = partition


class DataError(ConnectError):
    """A record's data is not what a transform or a converter can handle: a value that is not a
    JSON object for a ``*Field`` transform, a record without the timestamp a router needs, bytes
    that are not JSON for ``JsonConverter``. Connect's ``DataException``. It fails the task, with
    the record's position in the trace, unless ``errors.tolerance=all`` skips the record; say in
    the message what the data should have been."""


# --- errors of the Kafka clients (``context.clients``) -------------------------------------------


class KafkaError(ConnectError):
    """An error a Kafka client (:mod:`mirrorline.api.clients`) raised: the broker refused a request,
    or the client could not carry it out.

    ``code`` is Kafka's error code when a broker answered with one (3 UNKNOWN_TOPIC_OR_PARTITION,
    29 TOPIC_AUTHORIZATION_FAILED...), else None. ``retriable`` is Kafka's verdict on that error
    (a leader moving, a coordinator loading): the same call may succeed later. ``partitions`` maps
    each partition the error is about to the offset concerned (None when there is none or it is
    not known); empty when the error names no partition. The message is the client's.
    """

    def __init__(self, message: str = "", *, code: int | None = None, retriable: bool | None = None,
                 partitions: dict | None = None):
        super().__init__(message)
        self.code = code
        if retriable is not None:
            self.retriable = retriable
        self.partitions = dict(partitions or {})


class KafkaTimeoutError(KafkaError):
    """A client-side wait ran out: no answer in ``request.timeout.ms``, metadata not found in
    ``max.block.ms``, a producer's buffer that stayed full."""


class KafkaConnectionError(KafkaError):
    """No connection to the brokers (down, unreachable, or refusing the TLS/SASL settings)."""


class CorruptRecordError(KafkaError):
    """A fetched record batch failed its CRC or size check."""


class OffsetOutOfRangeError(KafkaError):
    """A fetch position is outside its partition's log (``partitions`` holds the positions); raised
    by consumers whose ``auto.offset.reset`` is ``none``."""


class NoOffsetForPartitionError(KafkaError):
    """A partition has no position and ``auto.offset.reset`` is ``none``."""


class RecordTooLargeError(KafkaError):
    """A record is larger than the fetch size (``max.partition.fetch.bytes``) or ``max.request.size``;
    ``partitions`` holds the partition and the offset of the record."""


class UnknownTopicOrPartitionError(KafkaError):
    """The topic or partition does not exist (code 3)."""


class TopicAlreadyExistsError(KafkaError):
    """A topic to create exists already (code 36)."""


class TopicAuthorizationFailedError(KafkaError):
    """The principal may not do this on the topic (code 29)."""


class GroupAuthorizationFailedError(KafkaError):
    """The principal may not do this on the consumer group (code 30)."""


class ClusterAuthorizationFailedError(KafkaError):
    """The principal may not do this on the cluster (code 31), e.g. DESCRIBE for listing ACLs."""


class TransactionalIdAuthorizationFailedError(KafkaError):
    """The principal may not use the transactional id (code 53)."""


class SecurityDisabledError(KafkaError):
    """The cluster runs no authorizer, so ACLs cannot be listed or created (code 54)."""


class ProducerFencedError(KafkaError):
    """Another producer with the same transactional id started (a newer epoch): this one may write no more."""


class GroupNotEmptyError(KafkaError):
    """The consumer group has active members, so an administrator may not change its offsets.

    ``group`` is the group id; ``code`` the broker's answer (UNKNOWN_MEMBER_ID,
    REBALANCE_IN_PROGRESS, NON_EMPTY_GROUP, GROUP_SUBSCRIBED_TO_TOPIC...).
    """

    def __init__(self, group: str, message: str, *, code: int | None = None):
        super().__init__(message, code=code)
        self.group = group

    @property
    def error_code(self) -> int | None:
        """The broker's code, as :attr:`code` (this error's name for it before the client wall)."""
        return self.code
