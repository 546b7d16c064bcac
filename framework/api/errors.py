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
