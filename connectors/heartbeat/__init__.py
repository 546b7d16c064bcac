"""MirrorMaker 2's MirrorHeartbeatConnector for mirrorline, registered like any third-party plugin."""

from mirrorline.api import hookimpl


@hookimpl
def register_connectors():
    """The MirrorHeartbeat connector (also known by MM2's Java class name)."""
    from mirrorline.connectors.heartbeat.connector import MirrorHeartbeatConnector

    return [MirrorHeartbeatConnector]
