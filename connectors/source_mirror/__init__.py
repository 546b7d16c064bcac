"""MirrorMaker 2's MirrorSourceConnector for mirrorline, registered like any third-party plugin.

Besides the connector, the plugin adds the mirroring topic-selection controls (IBM Event
Streams-style): the ``/admin/mirroring/*`` REST routes. The ``mirrorline mirroring`` command,
which also reads ``mm2.properties``, comes with the MM2 commands (:mod:`mirrorline.connectors.mm2`).
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

