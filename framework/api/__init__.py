"""The plugin author's API: everything a connector may import from mirrorline.

This package imports nothing from the runtime; the runtime imports it. Changes here are
changes to the contract with every plugin, so they are deliberate and documented.
"""

from mirrorline.api.config import (
    NO_DEFAULT,
    Config,
    ConfigDef,
    ConfigKey,
    ConfigValue,
    Importance,
    NonEmptyString,
    OneOf,
    Password,
    Range,
    RegexList,
    Type,
    Validator,
    ValidString,
    split_list,
)
from mirrorline.api.connector import (
    Connector,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SinkConnector,
    SourceConnector,
)
from mirrorline.api.converters import Converter, HeaderConverter
from mirrorline.api.clients import AclBinding, AclFilter, Admin, BatchFetch, Consumer, KafkaClients, Producer
from mirrorline.api.context import (
    ConnectorContext,
    OffsetReader,
    PluginContext,
    SourceTaskContext,
    TransactionContext,
)
from mirrorline.api.errors import (
    AlreadyExistsError,
    BadRequestError,
    ClusterAuthorizationFailedError,
    ConfigError,
    ConnectError,
    CorruptRecordError,
    DataError,
    ForbiddenError,
    GroupAuthorizationFailedError,
    GroupNotEmptyError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NoOffsetForPartitionError,
    NotFoundError,
    OffsetOutOfRangeError,
    PartitionNotAvailableError,
    ProducerFencedError,
    RebalanceInProgressError,
    RecordTooLargeError,
    RetriableError,
    SecurityDisabledError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from mirrorline.api.hookspecs import hookimpl, hookspec
from mirrorline.api.jobs import (ConnectorRef, Job, JobContext, JobSettings, PartitionTarget, Progress, SourceOffsets,
                                 WriteResult)
from mirrorline.api.kafka import (BrokerInfo, ClusterDescription, ConfigEntry, ConfigSource, ConsumerRecord,
                                  FetchedBatch, GroupListing, NewTopic, OffsetAndMetadata, OffsetAndTimestamp,
                                  PartitionInfo, TopicDescription)
from mirrorline.api.launcher import Command, WorkerLauncher, WorkerSpec
from mirrorline.api.records import ConnectorTaskId, RecordMetadata, SinkRecord, SourceBatch, SourceRecord
from mirrorline.api.rest_extension import ClusterState, RestExtension, RestExtensionContext, RestHandler, RestRequest
from mirrorline.api.secrets import HIDDEN, is_secret, redact, scrub
from mirrorline.api.sink import ErrantRecordReporter, SinkTask, SinkTaskContext, TopicPartition
from mirrorline.api.task import SourceTask
from mirrorline.api.transforms import Predicate, Transformation

__all__ = [
    "NO_DEFAULT", "AlreadyExistsError", "BadRequestError", "Command", "WorkerLauncher", "WorkerSpec", "Config", "ConfigDef", "ConfigError", "ConfigKey",
    "ConfigValue", "ConnectError", "Connector", "ForbiddenError", "ConnectorContext", "ConnectorTaskId", "Importance",
    "NonEmptyString", "NotFoundError", "OffsetReader", "OneOf", "PartitionNotAvailableError", "Password", "Range",
    "RebalanceInProgressError",
    "RecordMetadata", "RegexList", "RetriableError", "SourceBatch", "SourceConnector", "SourceRecord", "SourceTask",
    "SourceTaskContext", "Type", "Validator", "ValidString", "hookimpl", "hookspec", "split_list",
    "HIDDEN", "is_secret", "redact", "scrub",
    "ClusterState", "RestExtension", "RestExtensionContext", "RestHandler", "RestRequest",
    "DataError", "Predicate", "Transformation", "Converter", "HeaderConverter",
    "ConnectorRef", "Job", "JobContext", "JobSettings", "PartitionTarget", "Progress", "SourceOffsets", "WriteResult",
    "AclBinding", "AclFilter", "KafkaClients", "PluginContext",
    "ErrantRecordReporter", "SinkConnector", "SinkRecord", "SinkTask", "SinkTaskContext", "TopicPartition",
    "ConnectorTransactionBoundaries", "ExactlyOnceSupport", "TransactionContext",
    "Admin", "BatchFetch", "Consumer", "Producer",
    "BrokerInfo", "ClusterDescription", "ConfigEntry", "ConfigSource", "ConsumerRecord", "FetchedBatch",
    "GroupListing", "NewTopic", "OffsetAndMetadata", "OffsetAndTimestamp", "PartitionInfo", "TopicDescription",
    "ClusterAuthorizationFailedError", "CorruptRecordError", "GroupAuthorizationFailedError", "GroupNotEmptyError",
    "KafkaConnectionError", "KafkaError", "KafkaTimeoutError", "NoOffsetForPartitionError", "OffsetOutOfRangeError",
    "ProducerFencedError", "RecordTooLargeError", "SecurityDisabledError", "TopicAlreadyExistsError",
    "TopicAuthorizationFailedError", "TransactionalIdAuthorizationFailedError", "UnknownTopicOrPartitionError",
]
