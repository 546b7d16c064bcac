"""MirrorMaker 2's MirrorCheckpointConnector for mirrorline, registered like any plugin."""

from mirrorline.api import hookimpl


@hookimpl
def register_connectors():
    """The MirrorCheckpoint connector (also known by MM2's Java class name)."""
    from mirrorline.connectors.checkpoint.connector import MirrorCheckpointConnector

    return [MirrorCheckpointConnector]
