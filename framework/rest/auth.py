"""Authentication of REST requests: HTTP Basic as Kafka Connect's ``BasicAuthSecurityRestExtension``,
and signatures on requests forwarded between workers (Connect's session keys, KIP-507).

Basic authentication is on when ``rest.extension.classes`` names
``org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension``. The
users come from a file in the format of Connect's ``PropertyFileLoginModule`` (Java properties:
``user: password`` or ``user=password``), named by ``rest.basic.auth.credentials.file`` or, as
Connect users name it, by the ``file`` option of the ``PropertyFileLoginModule`` entry of the
``KafkaConnect`` section of the JAAS file passed as ``-Djava.security.auth.login.config=...`` in
``KAFKA_OPTS``. Unlike Connect, an empty credentials file is refused rather than letting
everyone in.

A request without valid credentials gets 401, ``WWW-Authenticate: Basic realm="KafkaConnect"``
and Connect's ``{"error_code": 401, "message": ...}`` body. A request one worker forwards to
another (``?forward=false``) is signed instead: HMAC-SHA256, with the cluster's session key that
the leader keeps in the config topic, over the method, the request target, a millisecond
timestamp and the body; ``X-Connect-Authorization`` carries the signature (base64),
``X-Connect-Request-Signature-Algorithm`` the algorithm and ``X-Mirrorline-Request-Timestamp``
the timestamp, which must be within :data:`MAX_SIGNATURE_AGE_S` of the receiver's clock. A
forwarded request is also let in on valid user credentials (the worker forwards the
``Authorization`` header it got, as Connect does); a request with a signature that does not
verify is refused whatever else it carries.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import logging
import os
import re
import secrets
import shlex
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from mirrorline.clients.configfile import parse_properties
from mirrorline.api.errors import ConfigError
from mirrorline.rest.common import error_response, read_body

log = logging.getLogger(__name__)

BASIC_AUTH_EXTENSION = "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"
PROPERTY_FILE_LOGIN_MODULE = "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule"
#: The JAAS login context Connect's basic-auth extension reads, also sent as the realm.
JAAS_CONTEXT = "KafkaConnect"
REALM = JAAS_CONTEXT

SIGNATURE_HEADER = "X-Connect-Authorization"
SIGNATURE_ALGORITHM_HEADER = "X-Connect-Request-Signature-Algorithm"
TIMESTAMP_HEADER = "X-Mirrorline-Request-Timestamp"
SIGNATURE_ALGORITHM = "HmacSHA256"
#: How far a signed request's timestamp may be from the receiver's clock.
MAX_SIGNATURE_AGE_S = 300.0

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


# -- credentials -------------------------------------------------------------------------------

class Credentials:
    """Users and passwords of Basic authentication; :meth:`check` compares in constant time."""

    def __init__(self, users: Mapping[str, str], source: str = "<memory>"):
        if not users:
            raise ConfigError(f"the Basic authentication credentials file {source} lists no user; Connect would "
                              f"then let every request in, mirrorline refuses to start")
        self._users = {user: password.encode("utf-8") for user, password in users.items()}
        self.source = source
        # compared against when the user is unknown, so that both cases take the same time
        self._decoy = secrets.token_bytes(32)

    @property
    def users(self) -> list[str]:
        """The user names (never the passwords)."""
        return sorted(self._users)

    def check(self, user: str, password: str) -> bool:
        """Whether ``user`` exists and ``password`` is theirs (no early exit on a mismatch)."""
        expected = self._users.get(user)
        matches = hmac.compare_digest(expected if expected is not None else self._decoy, password.encode("utf-8"))
        return matches and expected is not None


def parse_credentials(text: str, source: str = "<string>") -> dict[str, str]:
    """Users and passwords from the text of a ``PropertyFileLoginModule`` file (Java properties)."""
    return parse_properties(text, source)


def load_credentials_file(path: str | Path) -> Credentials:
    """:class:`Credentials` from a ``PropertyFileLoginModule`` file; ConfigError if unreadable or empty."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the Basic authentication credentials file {path}: "
                          f"{exc.strerror or exc}") from None
    return Credentials(parse_credentials(text, str(path)), str(path))


@dataclass(frozen=True)
class JaasEntry:
    """One login module line of a JAAS section: class, control flag and options."""

    module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


_JAAS_TOKEN = re.compile(r'\s*(?:(?P<string>"(?:[^"\\]|\\.)*")|(?P<punct>[{};=])|(?P<word>[^\s{};="]+))')


def _jaas_tokens(text: str, source: str) -> list[str]:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"(?m)//.*$", "", text)
    tokens, position = [], 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            return tokens
        match = _JAAS_TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise ConfigError(f"JAAS file {source}: cannot read {text[position:position + 20]!r}")
        token = match.group("string")
        tokens.append(token if token is not None else match.group("punct") or match.group("word"))
        position = match.end()


def parse_jaas(text: str, source: str = "<string>") -> dict[str, list[JaasEntry]]:
    """The sections of a JAAS login configuration: ``{context name: [entries]}``.

    The syntax is Java's: ``Name { module.Class flag key="value" key2=value2; ... };`` with ``//``
    and ``/* */`` comments. Quoted option values keep their text (``\\"`` and ``\\\\`` unescaped).
    """
    tokens = _jaas_tokens(text, source)
    sections: dict[str, list[JaasEntry]] = {}
    i = 0

    def expect(what: str) -> None:
        nonlocal i
        if i >= len(tokens) or tokens[i] != what:
            found = tokens[i] if i < len(tokens) else "end of file"
            raise ConfigError(f"JAAS file {source}: expected {what!r}, found {found!r}")
        i += 1

    def word(what: str) -> str:
        nonlocal i
        if i >= len(tokens) or tokens[i] in "{};=":
            found = tokens[i] if i < len(tokens) else "end of file"
            raise ConfigError(f"JAAS file {source}: expected {what}, found {found!r}")
        i += 1
        return tokens[i - 1]

    while i < len(tokens):
        name = word("a login context name")
        expect("{")
        entries = sections.setdefault(name, [])
        while i < len(tokens) and tokens[i] != "}":
            module = word("a login module class")
            flag = word("a control flag (required, requisite, sufficient or optional)")
            options: dict[str, str] = {}
            while i < len(tokens) and tokens[i] != ";":
                key = word("an option name")
                expect("=")
                value = word("an option value")
                if value.startswith('"'):
                    value = re.sub(r"\\(.)", r"\1", value[1:-1])
                options[key] = value
            expect(";")
            entries.append(JaasEntry(module, flag, options))
        expect("}")
        expect(";")
    return sections


def jaas_path_from_java_options(java_options: str) -> str | None:
    """The ``-Djava.security.auth.login.config=`` path in a ``KAFKA_OPTS``-style string (last one wins)."""
    found = None
    try:
        words = shlex.split(java_options)
    except ValueError:
        words = java_options.split()
    for argument in words:
        if argument.startswith("-Djava.security.auth.login.config="):
            found = argument.split("=", 1)[1].lstrip("=")  # Java also accepts "==path" (replace, not append)
    return found or None


def credentials_file_from_jaas(path: str | Path) -> str:
    """The ``file`` option of the ``KafkaConnect`` section's ``PropertyFileLoginModule`` entry."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the JAAS file {path} (java.security.auth.login.config in KAFKA_OPTS): "
                          f"{exc.strerror or exc}") from None
    sections = parse_jaas(text, str(path))
    if JAAS_CONTEXT not in sections:
        raise ConfigError(f"JAAS file {path} has no {JAAS_CONTEXT} section, which Basic authentication reads")
    for entry in sections[JAAS_CONTEXT]:
        if entry.module == PROPERTY_FILE_LOGIN_MODULE:
            if not entry.options.get("file"):
                raise ConfigError(f"JAAS file {path}: the {JAAS_CONTEXT} PropertyFileLoginModule entry has no "
                                  f"file=\"...\" option")
            return entry.options["file"]
    modules = ", ".join(e.module for e in sections[JAAS_CONTEXT]) or "none"
    raise ConfigError(f"JAAS file {path}: the {JAAS_CONTEXT} section must use {PROPERTY_FILE_LOGIN_MODULE} "
                      f"(found: {modules}); other login modules are not supported")


def basic_auth_enabled(extension_classes: Iterable[str]) -> bool:
    """Whether ``rest.extension.classes`` turns Basic auth on; ConfigError naming an unknown extension."""
    enabled = False
    for name in extension_classes:
        if name == BASIC_AUTH_EXTENSION:
            enabled = True
        else:
            raise ConfigError(f"rest.extension.classes: unknown REST extension {name}; the only one "
                              f"supported is {BASIC_AUTH_EXTENSION}")
    return enabled


def credentials_from_config(config: Mapping[str, Any], environ: Mapping[str, str] | None = None
                            ) -> Credentials | None:
    """The Basic-auth users a worker config asks for, or None when Basic auth is off.

    ``rest.basic.auth.credentials.file`` wins; otherwise the JAAS file named in ``KAFKA_OPTS``.
    """
    environ = os.environ if environ is None else environ
    enabled = basic_auth_enabled(config.get("rest.extension.classes") or [])
    path = config.get("rest.basic.auth.credentials.file")
    if not enabled:
        if path:
            raise ConfigError(f"rest.basic.auth.credentials.file is set but Basic authentication is off: add "
                              f"{BASIC_AUTH_EXTENSION} to rest.extension.classes")
        return None
    if not path:
        jaas = jaas_path_from_java_options(environ.get("KAFKA_OPTS", ""))
        if jaas is None:
            raise ConfigError(f"{BASIC_AUTH_EXTENSION} needs credentials: set rest.basic.auth.credentials.file, "
                              f"or pass -Djava.security.auth.login.config=/path/jaas.conf in KAFKA_OPTS")
        path = credentials_file_from_jaas(jaas)
    return load_credentials_file(path)


# -- request signatures between workers -----------------------------------------------------

def _signed_payload(method: str, target: str, timestamp_ms: str, body: bytes) -> bytes:
    return b"\n".join([method.upper().encode(), target.encode("utf-8"), timestamp_ms.encode()]) + b"\n" + body


def sign_request(key: bytes, method: str, target: str, body: bytes, *, now_ms: int | None = None) -> dict[str, str]:
    """The headers that sign a forwarded request (``target`` is the path and query as sent)."""
    timestamp = str(int(time.time() * 1000) if now_ms is None else now_ms)
    digest = hmac.new(key, _signed_payload(method, target, timestamp, body), hashlib.sha256).digest()
    return {SIGNATURE_HEADER: base64.b64encode(digest).decode("ascii"),
            SIGNATURE_ALGORITHM_HEADER: SIGNATURE_ALGORITHM, TIMESTAMP_HEADER: timestamp}


def verify_signature(keys: Iterable[bytes], method: str, target: str, body: bytes, headers: Mapping[str, str],
                     *, now_ms: int | None = None) -> str | None:
    """None when the headers hold a valid signature by one of ``keys``; otherwise why not."""
    if headers.get(SIGNATURE_ALGORITHM_HEADER, SIGNATURE_ALGORITHM) != SIGNATURE_ALGORITHM:
        return f"unsupported request signature algorithm {headers.get(SIGNATURE_ALGORITHM_HEADER)!r}"
    timestamp = headers.get(TIMESTAMP_HEADER, "")
    if not timestamp.isdigit():
        return "the request signature has no timestamp"
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if abs(now - int(timestamp)) > MAX_SIGNATURE_AGE_S * 1000:
        return "the request signature has expired (or the workers' clocks differ too much)"
    try:
        given = base64.b64decode(headers.get(SIGNATURE_HEADER, ""), validate=True)
    except (binascii.Error, ValueError):
        return "the request signature is not valid base64"
    payload = _signed_payload(method, target, timestamp, body)
    valid = False
    for key in keys:
        valid |= hmac.compare_digest(hmac.new(key, payload, hashlib.sha256).digest(), given)
    return None if valid else "the request signature does not match the cluster's session key"


# -- the middleware --------------------------------------------------------------------------

def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """``(user, password)`` from an ``Authorization: Basic ...`` header; None if absent or malformed."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic" or not value.strip():
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    user, colon, password = decoded.partition(":")
    if not colon:
        return None
    return user, password


@dataclass
class RestAuth:
    """What the auth middleware enforces.

    ``credentials`` (None: no Basic auth, every request passes, as in Connect without the
    extension); ``session_keys`` returns the keys a forwarded request may be signed with (the
    cluster's current and previous session keys; empty in standalone mode); ``metrics_open``
    leaves ``GET /metrics`` without authentication.
    """

    credentials: Credentials | None = None
    session_keys: Callable[[], list[bytes]] = lambda: []
    metrics_open: bool = False

    @property
    def enabled(self) -> bool:
        """Whether requests are authenticated at all."""
        return self.credentials is not None

    def _open(self, request: web.Request) -> bool:
        # /health stays open: it reveals only "healthy"/"starting", and orchestrator probes
        # (Kubernetes httpGet) should not need the REST credentials.
        if request.method not in ("GET", "HEAD"):
            return False
        return request.path == "/health" or (self.metrics_open and request.path == "/metrics")

    def middleware(self) -> Callable[[web.Request, _Handler], Awaitable[web.StreamResponse]]:
        """The aiohttp middleware (it runs inside the error middleware)."""

        @web.middleware
        async def auth_middleware(request: web.Request, handler: _Handler) -> web.StreamResponse:
            if self.credentials is None or self._open(request):
                return await handler(request)
            if SIGNATURE_HEADER in request.headers:
                problem = verify_signature(self.session_keys(), request.method, request.raw_path,
                                           await read_body(request), request.headers)
                if problem is None:
                    return await handler(request)
                log.warning("Refused a signed %s %s from %s: %s", request.method, request.path, request.remote, problem)
                return self._unauthorized(f"Invalid internal request signature: {problem}")
            given = basic_credentials(request.headers.get("Authorization"))
            if given is None:
                if "Authorization" in request.headers:
                    return self._unauthorized("Malformed Authorization header: expected 'Basic <base64 of "
                                              "user:password>'")
                return self._unauthorized("Authentication required: send HTTP Basic credentials")
            if not self.credentials.check(*given):
                log.info("Refused %s %s from %s: wrong credentials", request.method, request.path, request.remote)
                return self._unauthorized("User cannot access the resource: wrong user name or password")
            return await handler(request)

        return auth_middleware

    @staticmethod
    def _unauthorized(message: str) -> web.Response:
        return error_response(401, message, headers={"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'})


def rest_auth_from_config(config: Mapping[str, Any], *, session_keys: Callable[[], list[bytes]] | None = None,
                          environ: Mapping[str, str] | None = None) -> RestAuth:
    """The :class:`RestAuth` a parsed worker config asks for (ConfigError on a bad setting)."""
    return RestAuth(credentials=credentials_from_config(config, environ),
                    session_keys=session_keys or (lambda: []),
                    metrics_open=not config.get("rest.metrics.auth.enable", True))


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (an address or a name) only ever means this machine; '' (every interface) does not."""
    if not host or host in ("0.0.0.0", "::"):
        return False
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)


def warn_if_open(host: str, auth: RestAuth, client_certificates_required: bool) -> bool:
    """Log a WARNING when the REST API listens beyond loopback with no authentication; True if it did."""
    if auth.enabled or client_certificates_required or is_loopback_host(host):
        return False
    log.warning("The REST API listens on %s without authentication: anyone who can reach it can create, change "
                "and delete connectors. Turn on Basic authentication (rest.extension.classes=%s) or client "
                "certificates (listeners.https.ssl.client.auth=required), or listen on 127.0.0.1 only.",
                host or "every interface", BASIC_AUTH_EXTENSION)
    return True
