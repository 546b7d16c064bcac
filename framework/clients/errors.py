"""aiokafka's errors, translated at the wall into the contract's (:mod:`mirrorline.api.errors`).

Everything this package hands out raises :class:`~mirrorline.api.errors.KafkaError` or one of its
subclasses, never an aiokafka class: :func:`translate` maps an aiokafka exception to ours (the
class by the table below, anything else to :class:`KafkaError`), keeping its message, Kafka's
error code, its ``retriable`` verdict and the partitions it names; the original is the
translation's ``__cause__``. :func:`error_for_code` makes the error for a code a broker answered
in a response body (CreateTopics, DescribeTopics...), where aiokafka raises nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiokafka import errors as ak
from aiokafka.structs import TopicPartition as AioPartition

from mirrorline.api import errors as ml
from mirrorline.api.kafka import TopicPartition

#: The client library's own error bases, for a caller that reports any Kafka client error as one line
#: (the CLI: a plugin command may use aiokafka itself); everything this package hands out is ours.
LIBRARY_ERRORS: tuple[type[BaseException], ...] = (ak.KafkaError,)

#: aiokafka class -> ours; a subclass of a listed class gets its nearest listed base's translation.
_CLASSES: dict[type[BaseException], type[ml.KafkaError]] = {
    ak.KafkaTimeoutError: ml.KafkaTimeoutError,
    ak.RequestTimedOutError: ml.KafkaTimeoutError,
    ak.KafkaConnectionError: ml.KafkaConnectionError,
    ak.NodeNotReadyError: ml.KafkaConnectionError,
    ak.NoBrokersAvailable: ml.KafkaConnectionError,
    ak.CorruptRecordException: ml.CorruptRecordError,
    ak.OffsetOutOfRangeError: ml.OffsetOutOfRangeError,
    ak.NoOffsetForPartitionError: ml.NoOffsetForPartitionError,
    ak.RecordTooLargeError: ml.RecordTooLargeError,
    ak.MessageSizeTooLargeError: ml.RecordTooLargeError,
    ak.RecordListTooLargeError: ml.RecordTooLargeError,
    ak.UnknownTopicOrPartitionError: ml.UnknownTopicOrPartitionError,
    ak.TopicAlreadyExistsError: ml.TopicAlreadyExistsError,
    ak.TopicAuthorizationFailedError: ml.TopicAuthorizationFailedError,
    ak.GroupAuthorizationFailedError: ml.GroupAuthorizationFailedError,
    ak.ClusterAuthorizationFailedError: ml.ClusterAuthorizationFailedError,
    ak.TransactionalIdAuthorizationFailed: ml.TransactionalIdAuthorizationFailedError,
    ak.SecurityDisabled: ml.SecurityDisabledError,
    ak.ProducerFenced: ml.ProducerFencedError,
}
#: Kafka error codes of the classes above, for codes read from response bodies.
_BY_CODE: dict[int, type[ml.KafkaError]] = {
    cls.errno: ours for cls, ours in _CLASSES.items() if isinstance(getattr(cls, "errno", None), int)}
_BY_CODE[90] = ml.ProducerFencedError  # PRODUCER_FENCED: aiokafka raises ProducerFenced, which has no errno
#: Names of codes aiokafka does not know (its UnknownError), for messages.
_UNNAMED = {86: "GroupSubscribedToTopicError", 90: "ProducerFencedError"}


def translate(exc: BaseException, assigned: Iterable[TopicPartition] = ()) -> BaseException:
    """The contract's error for an aiokafka exception; any other exception is returned as it is.

    ``assigned``: the caller's partitions, so that an error naming only a topic (a fetch refused by
    TOPIC_AUTHORIZATION_FAILED) names that topic's assigned partitions.
    """
    if isinstance(exc, ml.ConnectError) or not isinstance(exc, (ak.KafkaError, ak.ConsumerStoppedError)):
        return exc
    ours = ml.KafkaError
    for cls in type(exc).__mro__:
        found = _CLASSES.get(cls)
        if found is not None:
            ours = found
            break
    code = getattr(exc, "errno", None)
    translated = ours(_message(exc), code=code if isinstance(code, int) else None,
                      retriable=bool(getattr(exc, "retriable", False)),
                      partitions=_partitions(exc, assigned))
    translated.__cause__ = exc
    return translated


def error_for_code(code: int, message: str) -> ml.KafkaError:
    """The contract's error for a Kafka error code a broker answered in a response body (``code`` != 0)."""
    aio = ak.for_code(code)
    ours = _BY_CODE.get(code, ml.KafkaError)
    name = _UNNAMED.get(code, aio.__name__) if aio is ak.UnknownError else aio.__name__
    return ours(f"[Error {code}] {name}: {message}", code=code, retriable=bool(getattr(aio, "retriable", False)))


def _message(exc: BaseException) -> str:
    if isinstance(exc, ak.RecordTooLargeError) and len(exc.args) > 1 and isinstance(exc.args[0], str):
        try:  # aiokafka passes a %-format string and its arguments
            return f"{type(exc).__name__}: {exc.args[0] % exc.args[1:]}"
        except (TypeError, ValueError):
            pass
    if isinstance(exc, ak.ConsumerStoppedError):
        return "ConsumerStoppedError: the consumer was stopped"
    return str(exc)


def _partitions(exc: BaseException, assigned: Iterable[TopicPartition]) -> dict[TopicPartition, int | None]:
    """The partitions an aiokafka error names in its arguments, with the offset concerned (None: unknown)."""
    found: dict[TopicPartition, int | None] = {}
    args = exc.args
    for arg in args:
        if isinstance(arg, AioPartition):
            found[TopicPartition(arg.topic, arg.partition)] = None
        elif isinstance(arg, dict):
            found.update({TopicPartition(tp.topic, tp.partition): offset for tp, offset in arg.items()
                          if isinstance(tp, AioPartition) and (offset is None or isinstance(offset, int))})
        elif isinstance(arg, str) and isinstance(exc, ak.TopicAuthorizationFailedError):
            found.update({TopicPartition(*tp): None for tp in assigned if tp[0] == arg})
    if isinstance(exc, ak.RecordTooLargeError) and len(args) > 2 and isinstance(args[2], int):
        # (message, tp, fetch offset, ...): aiokafka has already moved the position past that record
        found = {tp: args[2] for tp in found}
    return found
