"""Forwarding a REST request to the worker that can carry it out: the leader, or an instance's owner.

The herder never speaks HTTP: it raises :class:`~mirrorline.runtime.herder.NotLeaderError` or
:class:`~mirrorline.runtime.herder.NotAssignedError` with that worker's URL, and
:func:`forwarding_middleware` sends the same request there (Connect's
``HerderRequestHandler.completeOrForwardRequest``). A forwarded request carries
``?forward=false`` so it is never forwarded again (a worker that is no longer the one to carry
it out answers 409 instead). The other worker's answer comes back unchanged: same status, same
body.

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
from aiohttp import web
from yarl import URL

from mirrorline.api.errors import ConnectError, RebalanceInProgressError
from mirrorline.rest.auth import sign_request
from mirrorline.rest.common import BODY
from mirrorline.runtime.herder import RequestElsewhereError

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

    def _headers(self, method: str, url: URL, data: bytes | None, authorization: str | None) -> dict[str, str]:
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if authorization:
            headers["Authorization"] = authorization
        key = self._signing_key() if self._signing_key is not None else None
        if key:
            headers.update(sign_request(key, method, url.raw_path_qs, data or b""))
        return headers

    async def send(self, method: str, url: URL, data: bytes | None,
                   authorization: str | None = None) -> tuple[int, bytes]:
        """Send one request to another worker; ``(status, body bytes)`` whatever the status.

        ``url`` must be built encoded, so that the target signed is byte for byte the one sent. A
        worker that cannot be reached is a RebalanceInProgressError (409): the cluster is likely
        rebalancing after losing it.
        """
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S))
        headers = self._headers(method, url, data, authorization)
        try:
            async with self._session.request(method, url, data=data, headers=headers,
                                             ssl=self._ssl_context if self._ssl_context is not None else True
                                             ) as response:
                return response.status, await response.read()
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            log.warning("Forwarding %s %s failed: %r", method, url, exc)
            raise RebalanceInProgressError(
                f"Could not forward the request to the worker at {url.origin()} ({exc.__class__.__name__}); the "
                f"cluster may be rebalancing after losing it. Retry shortly.") from None

    async def request(self, method: str, base_url: str, path: str, body: Any = None, *,
                      authorization: str | None = None) -> tuple[int, Any]:
        """Send ``body`` as JSON to ``path`` (with ``?forward=false``) on the worker at ``base_url``.

        ``(status, JSON body or None)``, or :class:`RemoteError` carrying the answer's status and message.
        """
        url = URL(base_url.rstrip("/") + path + "?forward=false", encoded=True)
        data = None if body is None else json.dumps(body).encode("utf-8")
        status, raw = await self.send(method, url, data, authorization)
        payload = json.loads(raw) if raw else None
        if status >= 400:
            message = payload.get("message") if isinstance(payload, dict) else None
            raise RemoteError(status, message or f"{method} {url} answered {status}")
        return status, payload

    async def forward(self, request: web.Request, base_url: str) -> web.Response:
        """Send ``request`` as it came (method, path, query, body, Authorization) to ``base_url``, with
        ``forward=false``, and answer with that worker's status and body."""
        target = request.rel_url.update_query(forward="false")
        url = URL(base_url.rstrip("/") + target.raw_path_qs, encoded=True)
        # a handler that read the body used up the stream; read_body kept the bytes
        data = request.get(BODY) if BODY in request else (await request.read() if request.body_exists else None)
        log.debug("Forwarding %s %s to %s", request.method, request.rel_url, base_url)
        status, raw = await self.send(request.method, url, data, request.headers.get("Authorization"))
        return web.Response(status=status, body=raw, content_type="application/json" if raw else None)

    async def close(self) -> None:
        """Close the HTTP session."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()


def is_forwarded(request: web.Request) -> bool:
    """Whether another worker forwarded ``request`` here (``?forward=false``)."""
    return request.query.get("forward", "").lower() == "false"


def forwarding_middleware(client: WorkerClient):
    """The aiohttp middleware that forwards a request the herder says another worker must carry out.

    It runs innermost (after authentication), so only authenticated requests are forwarded. A
    request that was itself forwarded gets 409 instead: the two workers disagree on who does what,
    which happens only during a rebalance.
    """

    @web.middleware
    async def forward_middleware(request: web.Request, handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except RequestElsewhereError as exc:
            if is_forwarded(request):
                raise RebalanceInProgressError(f"Cannot complete request because of a conflicting operation "
                                               f"(e.g. worker rebalance): {exc}") from None
            return await client.forward(request, exc.url)

    return forward_middleware
