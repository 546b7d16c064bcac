"""MirrorMaker 2's MirrorSourceConnector for mirrorline, registered like any third-party plugin.

Besides the connector, the plugin adds the mirroring topic-selection controls (IBM Event
Streams-style): the ``/admin/mirroring/*`` REST routes and the ``mirrorline mirroring`` command.
"""

from mirrorline.api import hookimpl


@hookimpl
def register_connectors():
    """The MirrorSource connector (also known by MM2's Java class name)."""
    from mirrorline.connectors.source_mirror.connector import MirrorSourceConnector

    return [MirrorSourceConnector]


@hookimpl
def register_rest_extensions():
    """``/admin/mirroring/topic-selection`` and ``/admin/mirroring/active-topics`` on every worker."""
    from mirrorline.connectors.source_mirror.rest_admin import MirroringRestExtension

    return [MirroringRestExtension]


@hookimpl
def register_commands():
    """``mirrorline mirroring``: the same controls from the command line."""
    from mirrorline.connectors.source_mirror.admin_cli import MirroringCommand

    return [MirroringCommand()]
