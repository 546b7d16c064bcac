"""Sending REST requests to another worker of the cluster: the leader, or the owner of a task.

Connect's rule, kept here: writes only the leader may make (connector configs, stop) are
forwarded to the leader; restarts go to the worker running the instance. A forwarded request
carries ``?forward=false`` so it is never forwarded again (a worker that is no longer the
leader answers 409 instead). The other worker's error comes back unchanged — same status,
same message — as a :class:`RemoteError`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import quote

import aiohttp

from framework.api.errors import ConnectError, RebalanceInProgressError

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
    """An HTTP client for other workers' REST APIs (one session, closed by :meth:`close`)."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    async def request(self, method: str, base_url: str, path: str, body: Any = None) -> tuple[int, Any]:
        """Send one forwarded request; ``(status, JSON body or None)``, or RemoteError for a 4xx/5xx."""
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S))
        url = base_url.rstrip("/") + path
        try:
            async with self._session.request(method, url, json=body, params={"forward": "false"}) as response:
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
