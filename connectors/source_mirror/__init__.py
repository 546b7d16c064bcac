"""MirrorMaker 2's MirrorSourceConnector for mirrorline, registered like any third-party plugin."""

from framework.api import hookimpl


@hookimpl
def register_connectors():
    """The MirrorSource connector (also known by MM2's Java class name)."""
    from connectors.source_mirror.connector import MirrorSourceConnector

    return [MirrorSourceConnector]
