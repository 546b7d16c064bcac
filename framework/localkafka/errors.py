"""The one error type of the local Kafka harness."""


class LocalKafkaError(RuntimeError):
    """A local cluster could not be fetched, started, or stopped; the message says why and what to do."""
