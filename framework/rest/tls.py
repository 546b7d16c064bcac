"""TLS of the REST API: the server's SSLContext for ``https://`` listeners, and the client one
workers use to forward requests to each other.

Settings are Kafka Connect's: ``ssl.keystore.*``, ``ssl.key.password``, ``ssl.truststore.*`` and
``ssl.client.auth``, taken either all from the ``listeners.https.`` prefix or, when no setting
with that prefix is given, all from the worker's un-prefixed ``ssl.*`` (Connect's
all-or-nothing rule). Key and trust stores may be PEM, PKCS12 (read with ``cryptography``) or
JKS (read with ``pyjks`` when it is installed). Python's ``ssl`` module loads a certificate
chain only from a file, so a PKCS12/JKS key is written for the moment of loading to a private
temporary file, encrypted with a throw-away password, and removed at once.
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mirrorline.api.config import Password
from mirrorline.api.errors import ConfigError
from mirrorline.runtime.worker_config import LISTENER_HTTPS_PREFIX

_JKS_MAGIC = b"\xfe\xed\xfe\xed"
_JCEKS_MAGIC = b"\xce\xce\xce\xce"

#: ``ssl.client.auth`` values and the server's certificate check for each.
CLIENT_AUTH_MODES = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def _secret(value: Any) -> str | None:
    if isinstance(value, Password):
        return value.value
    return value or None


@dataclass(frozen=True)
class RestSslSettings:
    """The TLS settings an https REST listener uses (already resolved from the prefix or ``ssl.*``)."""

    keystore_location: str | None = None
    keystore_password: str | None = None
    keystore_type: str = "JKS"
    key_password: str | None = None
    truststore_location: str | None = None
    truststore_password: str | None = None
    truststore_type: str = "JKS"
    client_auth: str = "none"
    endpoint_identification_algorithm: str = "https"
    source: str = "ssl."

    @classmethod
    def from_config(cls, config: Mapping[str, Any], originals: Mapping[str, Any] | None = None) -> RestSslSettings:
        """Resolve the settings from a parsed worker config (``originals`` tell which were given)."""
        given = originals if originals is not None else getattr(config, "originals", {})
        use_prefix = any(str(k).startswith(LISTENER_HTTPS_PREFIX) for k in given)
        prefix = (LISTENER_HTTPS_PREFIX if use_prefix else "") + "ssl."

        def get(name: str) -> Any:
            return config[prefix + name]

        return cls(
            keystore_location=get("keystore.location") or None,
            keystore_password=_secret(get("keystore.password")),
            keystore_type=(get("keystore.type") or "JKS").upper(),
            key_password=_secret(get("key.password")),
            truststore_location=get("truststore.location") or None,
            truststore_password=_secret(get("truststore.password")),
            truststore_type=(get("truststore.type") or "JKS").upper(),
            client_auth=(get("client.auth") or "none").lower(),
            endpoint_identification_algorithm=get("endpoint.identification.algorithm") or "",
            source=prefix,
        )

    @property
    def requires_client_certificate(self) -> bool:
        """Whether the listener refuses connections without a trusted client certificate."""
        return self.client_auth == "required"


# -- reading key and trust stores -------------------------------------------------------------

def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise ConfigError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None


def _store_kind(declared: str, data: bytes) -> str:
    """What a store really is: Java reads a PKCS12 file given as JKS (keystore.type.compat), so do we."""
    if declared == "PEM":
        return "PEM"
    if data.startswith(_JKS_MAGIC) or data.startswith(_JCEKS_MAGIC):
        return "JKS"
    return "PKCS12"


def _jks():
    try:
        import jks  # pyjks
    except ImportError:
        raise ConfigError("a JKS key or trust store needs the pyjks package, which is not installed: install "
                          "it, or convert the store to PKCS12 (keytool -importkeystore -deststoretype PKCS12) "
                          "and set the type to PKCS12") from None
    return jks


def _cryptography():
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise ConfigError("PKCS12 and JKS stores need the cryptography package, which is not installed; "
                          "use PEM stores or install it") from None
    return x509, serialization, pkcs12


def _load_jks(data: bytes, password: str | None, path: str, what: str):
    jks = _jks()
    try:
        return jks.KeyStore.loads(data, password or "", try_decrypt_keys=False)
    except Exception as exc:  # noqa: BLE001 - pyjks raises several unrelated types
        raise ConfigError(f"cannot open the {what} {path} as JKS: {exc} (wrong password?)") from None


def _key_material(settings: RestSslSettings) -> tuple[Any, list[Any]]:
    """(private key, certificate chain) of a PKCS12 or JKS key store, as ``cryptography`` objects."""
    x509, serialization, pkcs12 = _cryptography()
    path = settings.keystore_location
    data = _read(path, "key store")
    if _store_kind(settings.keystore_type, data) == "JKS":
        store = _load_jks(data, settings.keystore_password, path, "key store")
        if not store.private_keys:
            raise ConfigError(f"the key store {path} holds no private key")
        entry = next(iter(store.private_keys.values()))
        try:
            entry.decrypt(settings.key_password or settings.keystore_password or "")
        except Exception as exc:  # noqa: BLE001
            raise ConfigError(f"cannot decrypt the private key in {path}: {exc} (check ssl.key.password)") from None
        key = serialization.load_der_private_key(entry.pkey_pkcs8, None)
        chain = [x509.load_der_x509_certificate(der) for _, der in entry.cert_chain]
        return key, chain
    password = (settings.keystore_password or "").encode() or None
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(data, password)
    except ValueError as exc:
        raise ConfigError(f"cannot open the key store {path} as PKCS12: {exc} (wrong password or type?)") from None
    if key is None or cert is None:
        raise ConfigError(f"the key store {path} holds no private key with its certificate")
    return key, [cert, *extra]


def trusted_certificates_pem(settings: RestSslSettings) -> str | None:
    """The trust store's CA certificates as PEM text (None when no trust store is set)."""
    path = settings.truststore_location
    if not path:
        return None
    data = _read(path, "trust store")
    kind = _store_kind(settings.truststore_type, data)
    if kind == "PEM":
        return data.decode("ascii", errors="replace")
    x509, serialization, pkcs12 = _cryptography()
    if kind == "JKS":
        store = _load_jks(data, settings.truststore_password, path, "trust store")
        certs = [x509.load_der_x509_certificate(entry.cert) for entry in store.certs.values()]
        certs += [x509.load_der_x509_certificate(der) for entry in store.private_keys.values()
                  for _, der in entry.cert_chain[-1:]]
    else:
        password = (settings.truststore_password or "").encode() or None
        try:
            loaded = pkcs12.load_pkcs12(data, password)
        except ValueError as exc:
            raise ConfigError(f"cannot open the trust store {path} as PKCS12: {exc} (wrong password or "
                              f"type?)") from None
        certs = [c.certificate for c in loaded.additional_certs]
        if loaded.cert is not None:
            certs.append(loaded.cert.certificate)
    if not certs:
        raise ConfigError(f"the trust store {path} holds no certificate")
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode("ascii") for c in certs)


def _load_key_store(context: ssl.SSLContext, settings: RestSslSettings) -> None:
    path = settings.keystore_location
    if settings.keystore_type == "PEM":
        try:
            context.load_cert_chain(path, password=settings.key_password or settings.keystore_password)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot load the PEM key store {path} (key and certificates in one file): "
                              f"{exc}") from None
        return
    _, serialization, _ = _cryptography()
    key, chain = _key_material(settings)
    one_time = secrets.token_urlsafe(24)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.BestAvailableEncryption(one_time.encode()))
    pem += b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain)
    directory = tempfile.mkdtemp(prefix="mirrorline-tls-")  # created 0700
    file = os.path.join(directory, "chain.pem")
    try:
        with open(os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as handle:
            handle.write(pem)
        context.load_cert_chain(file, password=one_time)
    except ssl.SSLError as exc:
        raise ConfigError(f"cannot use the key in {path}: {exc}") from None
    finally:
        if os.path.exists(file):
            os.remove(file)
        os.rmdir(directory)


def _load_trust(context: ssl.SSLContext, settings: RestSslSettings, purpose: ssl.Purpose) -> None:
    pem = trusted_certificates_pem(settings)
    if pem is None:
        context.load_default_certs(purpose)
        return
    try:
        context.load_verify_locations(cadata=pem)
    except ssl.SSLError as exc:
        raise ConfigError(f"cannot use the trust store {settings.truststore_location}: {exc}") from None


def server_ssl_context(settings: RestSslSettings) -> ssl.SSLContext:
    """The SSLContext of an https REST listener (TLS 1.2 or later); ConfigError if the stores are unusable."""
    if not settings.keystore_location:
        raise ConfigError(f"an https listener needs a key store: set {settings.source}keystore.location "
                          f"(and its password and type)")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_key_store(context, settings)
    mode = CLIENT_AUTH_MODES.get(settings.client_auth)
    if mode is None:
        raise ConfigError(f"{settings.source}client.auth must be required, requested or none, "
                          f"not {settings.client_auth!r}")
    if mode != ssl.CERT_NONE:
        _load_trust(context, settings, ssl.Purpose.CLIENT_AUTH)
    context.verify_mode = mode
    return context


def client_ssl_context(settings: RestSslSettings) -> ssl.SSLContext:
    """The SSLContext a worker uses to reach other workers' https REST listeners.

    It trusts the trust store (or the system's CAs), presents the key store's certificate (for
    listeners with ``ssl.client.auth=required``) and checks host names unless
    ``ssl.endpoint.identification.algorithm`` is empty.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_trust(context, settings, ssl.Purpose.SERVER_AUTH)
    if settings.keystore_location:
        _load_key_store(context, settings)
    if not settings.endpoint_identification_algorithm:
        context.check_hostname = False
    return context
