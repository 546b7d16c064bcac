"""mirrorline-example-plugin: a third-party mirrorline plugin providing ``SequenceSourceConnector``.

mirrorline discovers it through the ``example`` entry point of the ``mirrorline`` group,
which names :mod:`mirrorline_example.plugin`. Nothing here imports mirrorline beyond
:mod:`mirrorline.api`.
"""

__version__ = "0.1.0"
