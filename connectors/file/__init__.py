"""Kafka Connect's ``connect-file`` connectors for mirrorline: a file source and a file sink.

They are the worked example of the plugin API (``docs/plugin-authoring.md``): small, and
registered through an entry point exactly as a third-party plugin would be.
"""

from mirrorline.api import hookimpl


@hookimpl
def register_connectors():
    """FileStreamSource and FileStreamSink (also known by Connect's Java class names)."""
    from mirrorline.connectors.file.sink import FileStreamSinkConnector
    from mirrorline.connectors.file.source import FileStreamSourceConnector

    return [FileStreamSourceConnector, FileStreamSinkConnector]
