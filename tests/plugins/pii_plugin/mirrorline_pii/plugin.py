"""The plugin module named by the ``mirrorline`` entry point: it only declares what it provides."""

from __future__ import annotations

from mirrorline.api import hookimpl

from mirrorline_pii.masking import PiiMask


@hookimpl
def register_transforms() -> list[type]:
    """The transforms of this plugin: ``PiiMask``."""
    return [PiiMask]
