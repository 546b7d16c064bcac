"""The built-in converters, registered like any plugin's (entry point ``converters``).

Kafka Connect's, with Connect's setting names and defaults, answering to Connect's Java class
names too: ``ByteArrayConverter`` (the default, and the mirror path's: bytes through
unchanged), ``StringConverter``, ``JsonConverter`` and the header converter
``SimpleHeaderConverter``. Like a third-party plugin, this package imports only
:mod:`mirrorline.api` and is found through its entry point.
"""

from mirrorline.api import hookimpl


@hookimpl
def register_converters():
    """The built-in converters and header converters."""
    from mirrorline.converters.bytearray import ByteArrayConverter
    from mirrorline.converters.json_converter import JsonConverter
    from mirrorline.converters.simple_header import SimpleHeaderConverter
    from mirrorline.converters.string import StringConverter

    return [ByteArrayConverter, StringConverter, JsonConverter, SimpleHeaderConverter]
