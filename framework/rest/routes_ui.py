"""``GET /ui``: the worker's status page.

One self-contained HTML file (``framework/rest/ui/index.html``, shipped as package data) whose
script polls the REST API (``/connectors?expand=status&expand=info`` and ``/metrics``) and
draws flows, connectors, tasks, per-topic throughput and lag, and per-group checkpoint age and
RPO. It loads nothing from anywhere else: the Content-Security-Policy below allows only the
page's own inline script and style (by hash) and requests to this server.

It uses the REST API's auth once that exists.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.resources
import re

from aiohttp import web

routes = web.RouteTableDef()

PAGE = "ui/index.html"
"""The page, relative to the ``mirrorline.rest`` package."""

_INLINE = re.compile(r"<(script|style)>(.*?)</\1>", re.DOTALL)


@functools.cache
def page() -> tuple[bytes, str]:
    """The page's bytes and its Content-Security-Policy (read once per process)."""
    text = importlib.resources.files("mirrorline.rest").joinpath(PAGE).read_text(encoding="utf-8")
    hashes: dict[str, list[str]] = {"script": [], "style": []}
    for kind, body in _INLINE.findall(text):
        digest = base64.b64encode(hashlib.sha256(body.encode("utf-8")).digest()).decode("ascii")
        hashes[kind].append(f"'sha256-{digest}'")
    csp = "; ".join([
        "default-src 'none'",
        "script-src " + " ".join(hashes["script"]),
        "style-src " + " ".join(hashes["style"]),
        "connect-src 'self'",
        "img-src 'self' data:",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ])
    return text.encode("utf-8"), csp


@routes.get("/ui", name="ui")
async def status_page(request: web.Request) -> web.Response:
    """The status page as ``text/html``."""
    body, csp = page()
    return web.Response(body=body, content_type="text/html", charset="utf-8", headers={
        "Content-Security-Policy": csp,
        "Cache-Control": "no-cache",
        "X-Content-Type-Options": "nosniff",
    })
