"""MirrorMaker 2's MirrorHeartbeatConnector for mirrorline, registered like any third-party plugin."""

from framework.api import hookimpl


@hookimpl
def register_connectors():
    """The MirrorHeartbeat connector (also known by MM2's Java class name)."""
    from connectors.heartbeat.connector import MirrorHeartbeatConnector

    return [MirrorHeartbeatConnector]
