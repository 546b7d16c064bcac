"""The Kafka Connect–compatible REST API: a thin aiohttp layer over :class:`~mirrorline.runtime.herder.Herder`.

Each handler parses the request, calls one herder method and maps the result or the
exception to Connect's status codes and JSON shapes. See ``docs/rest-api.md``.
"""

from mirrorline.rest.app import RestServer, create_app

__all__ = ["RestServer", "create_app"]
