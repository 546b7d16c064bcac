"""MirrorMaker 2's dedicated mode (``mirrorline mm2``), contributed as a plugin command."""

from framework.api import hookimpl


@hookimpl
def register_commands():
    """The ``mm2`` subcommand."""
    from connectors.mm2.command import MirrorMakerCommand

    return [MirrorMakerCommand()]
