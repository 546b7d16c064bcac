"""The one error type of the Spark backend: a one-line reason the session or a job cannot go on."""

from mirrorline.api.errors import ConnectError


class SparkUnavailable(ConnectError):
    """Spark cannot run here: pyspark or Java missing, the Kafka connector not downloadable, the
    master unreachable. The message names the cause and what to do, in one line."""
