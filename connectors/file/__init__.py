"""Kafka Connect's ``connect-file`` connectors for mirrorline: a file source and a file sink.

They are the worked example of the plugin API (``docs/plugin-authoring.md``): small, and
registered through an entry point exactly as a third-party plugin would be.
"""

from framework.api import hookimpl


@hookimpl
def register_connectors():
    """FileStreamSource and FileStreamSink (also known by Connect's Java class names)."""
    from connectors.file.sink import FileStreamSinkConnector
    from connectors.file.source import FileStreamSourceConnector

    return [FileStreamSourceConnector, FileStreamSinkConnector]
