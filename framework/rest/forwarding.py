"""Sending REST requests to another worker of the cluster: the leader, or the owner of a task.

Connect's rule, kept here: writes only the leader may make (connector configs, stop) are
forwarded to the leader; restarts go to the worker running the instance. A forwarded request
carries ``?forward=false`` so it is never forwarded again (a worker that is no longer the
leader answers 409 instead). The other worker's error comes back unchanged — same status,
same message — as a :class:`RemoteError`.

When the cluster authenticates REST requests, a forwarded request carries the ``Authorization``
header of the request it forwards (as Connect's forwarding does) and is signed with the
cluster's session key (:func:`mirrorline.rest.auth.sign_request`), so the receiver accepts it
even when the user authenticated with a client certificate, or when no user sent it at all.
Over https it uses the worker's TLS settings (trust store, and key store as client certificate).
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import aiohttp
from yarl import URL

from mirrorline.api.errors import ConnectError, RebalanceInProgressError
from mirrorline.rest.auth import REQUEST_AUTHORIZATION, sign_request

log = logging.getLogger(__name__)

#: How long a forwarded request may take (Connect's REST request timeout is 90 s).
FORWARD_TIMEOUT_S = 90.0


class RemoteError(ConnectError):
    """An error answer from the worker a request was forwarded to, with its HTTP status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.http_status = status


def connector_path(name: str, *rest: str) -> str:
    """``/connectors/<name>/...`` with the name percent-encoded."""
    return "/".join(["/connectors", quote(name, safe=""), *rest])


class WorkerClient:
    """An HTTP client for other workers' REST APIs (one session, closed by :meth:`close`).

    ``ssl_context`` is used for https workers; ``signing_key`` returns the cluster's current
    session key (None while there is none: requests then go unsigned).
    """

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None,
                 signing_key: Callable[[], bytes | None] | None = None) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._ssl_context = ssl_context
        self._signing_key = signing_key

    def _headers(self, method: str, url: URL, data: bytes | None) -> dict[str, str]:
        headers = {"Content-Type": "application/json"} if data is not None else {}
        authorization = REQUEST_AUTHORIZATION.get()
        if authorization:
            headers["Authorization"] = authorization
        key = self._signing_key() if self._signing_key is not None else None
        if key:
            headers.update(sign_request(key, method, url.raw_path_qs, data or b""))
        return headers

    async def request(self, method: str, base_url: str, path: str, body: Any = None) -> tuple[int, Any]:
        """Send one forwarded request; ``(status, JSON body or None)``, or RemoteError for a 4xx/5xx."""
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S))
        # built encoded, so the target signed is byte for byte the one sent
        url = URL(base_url.rstrip("/") + path + "?forward=false", encoded=True)
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = self._headers(method, url, data)
        try:
            async with self._session.request(method, url, data=data, headers=headers,
                                             ssl=self._ssl_context if self._ssl_context is not None else True
                                             ) as response:
                payload = await response.json(content_type=None) if response.content_length != 0 else None
                if response.status >= 400:
                    message = payload.get("message") if isinstance(payload, dict) else None
                    raise RemoteError(response.status, message or f"{method} {url} answered {response.status}")
                return response.status, payload
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            log.warning("Forwarding %s %s failed: %r", method, url, exc)
            raise RebalanceInProgressError(
                f"Could not forward the request to the worker at {base_url} ({exc.__class__.__name__}); the cluster "
                f"may be rebalancing after losing it. Retry shortly.") from None

    async def close(self) -> None:
        """Close the HTTP session."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()
