"""Kafka client settings in Java's names, turned into aiokafka keyword arguments.

Connect and MM2 configs spell client settings as the Java clients do (``linger.ms``,
``security.protocol``, ``sasl.jaas.config`` ...). :func:`client_kwargs` translates such a
map for an aiokafka producer, consumer or admin client, so TLS and SASL settings written for
Kafka Connect work unchanged. Settings aiokafka has no equivalent for are returned in
``ignored`` so the caller can log them once, instead of failing a whole connector. Security
settings are never ignored silently: a wrong one is a ConfigError naming it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import secrets
import ssl
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from mirrorline.api.config import Password
from mirrorline.api.errors import ConfigError
from mirrorline.clients.jaas import single_login_module
from mirrorline.clients import process_patches
from mirrorline.clients.retry_warnings import thin_retry_warnings

_INT = int
_STR = str


def _bool(value: Any) -> bool:
    return str(value).strip().lower() == "true"


def _acks(value: Any) -> Any:
    text = str(value).strip()
    return "all" if text in ("all", "-1") else int(text)


_COMMON = {
    "bootstrap.servers": ("bootstrap_servers", _STR),
    "client.id": ("client_id", _STR),
    "request.timeout.ms": ("request_timeout_ms", _INT),
    "retry.backoff.ms": ("retry_backoff_ms", _INT),
    "metadata.max.age.ms": ("metadata_max_age_ms", _INT),
    "connections.max.idle.ms": ("connections_max_idle_ms", _INT),
    "security.protocol": ("security_protocol", lambda v: str(v).strip().upper() or "PLAINTEXT"),  # as Java
    "sasl.mechanism": ("sasl_mechanism", _STR),
    "sasl.kerberos.service.name": ("sasl_kerberos_service_name", _STR),
}
_PRODUCER = {
    "acks": ("acks", _acks),
    "compression.type": ("compression_type", lambda v: None if str(v) == "none" else str(v)),
    "batch.size": ("max_batch_size", _INT),
    "linger.ms": ("linger_ms", _INT),
    "max.request.size": ("max_request_size", _INT),
    "enable.idempotence": ("enable_idempotence", _bool),
    "transactional.id": ("transactional_id", _STR),
    "transaction.timeout.ms": ("transaction_timeout_ms", _INT),
    # Only RecordProducer (mirrorline.clients.producer) takes this; plain AIOKafkaProducer does not.
    "max.block.ms": ("max_block_ms", _INT),
    # mirrorline's own (mirrorline.clients.produce_lanes): produce connections per broker
    "produce.connections.per.broker": ("produce_lanes", _INT),
    # Java's bound on bytes waiting to be sent; RecordProducer keeps it, the source task enforces it
    "buffer.memory": ("buffer_memory", _INT),
    # Java's cap on a failed batch's exponential back-off (KIP-580); RecordProducer only
    "retry.backoff.max.ms": ("retry_backoff_max_ms", _INT),
}
_CONSUMER = {
    "group.id": ("group_id", _STR),
    "auto.offset.reset": ("auto_offset_reset", _STR),
    "enable.auto.commit": ("enable_auto_commit", _bool),
    "auto.commit.interval.ms": ("auto_commit_interval_ms", _INT),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", _INT),
    "fetch.min.bytes": ("fetch_min_bytes", _INT),
    "fetch.max.bytes": ("fetch_max_bytes", _INT),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", _INT),
    "max.poll.records": ("max_poll_records", _INT),
    "max.poll.interval.ms": ("max_poll_interval_ms", _INT),
    "session.timeout.ms": ("session_timeout_ms", _INT),
    "heartbeat.interval.ms": ("heartbeat_interval_ms", _INT),
    "isolation.level": ("isolation_level", _STR),
    "client.rack": ("client_rack", _STR),
    "check.crcs": ("check_crcs", _bool),
}
_ROLES = {"producer": _PRODUCER, "consumer": _CONSUMER, "admin": {}}

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: SASL mechanisms aiokafka implements. Java's default when ``sasl.mechanism`` is absent is GSSAPI.
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI")
#: Login modules whose ``username`` / ``password`` options are the client's SASL credentials.
_CREDENTIAL_LOGIN_MODULES = ("PlainLoginModule", "ScramLoginModule")

#: TLS settings read by :func:`ssl_context` (``ssl.cafile`` / ``ssl.certfile`` / ``ssl.keyfile``
#: are PEM paths, aiokafka's names, kept for configs written before the Java names were read).
_SSL_KEYS = frozenset({
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type", "ssl.truststore.certificates",
    "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.type", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.key.password", "ssl.endpoint.identification.algorithm",
    "ssl.enabled.protocols", "ssl.protocol", "ssl.cafile", "ssl.certfile", "ssl.keyfile"})


def client_kwargs(props: Mapping[str, Any], role: str) -> tuple[dict[str, Any], list[str]]:
    """``(kwargs, ignored keys)`` for an aiokafka client of ``role`` (producer, consumer or admin).

    ``security.protocol`` PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, with Java's TLS settings
    (see :func:`ssl_context`) and SASL settings: ``sasl.mechanism`` PLAIN, SCRAM-SHA-256 or
    SCRAM-SHA-512 (GSSAPI too, given the ``gssapi`` package) whose user and password come from
    ``sasl.jaas.config`` in Java's syntax (``...PlainLoginModule required username="u"
    password="p";`` or ``...ScramLoginModule ...``, see :mod:`mirrorline.clients.jaas`).

    Raises :class:`~mirrorline.api.errors.ConfigError` with one line naming the setting (never a
    secret) when a security setting is wrong: unknown protocol or mechanism, bad JAAS syntax, a
    missing or unreadable store, a wrong store or key password.
    """
    process_patches.install()  # no topic auto-creation, frames released (idempotent)
    thin_retry_warnings()  # consumers and admins repeat "Unable connect" as producers do (idempotent)
    table = {**_COMMON, **_ROLES[role]}
    props = {key: _plain(value) for key, value in props.items()}
    protocol = str(props.get("security.protocol", "PLAINTEXT")).strip().upper() or "PLAINTEXT"
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigError(f"security.protocol: {protocol} is not one of {', '.join(SECURITY_PROTOCOLS)}")
    kwargs: dict[str, Any] = {}
    ignored: list[str] = []
    for key, value in props.items():
        if key in table:
            name, convert = table[key]
            kwargs[name] = convert(value)
        elif key == "sasl.jaas.config":
            if not protocol.startswith("SASL_"):
                ignored.append(key)  # as in Java: SASL settings mean nothing without a SASL protocol
        elif key not in _SSL_KEYS:
            ignored.append(key)
    if protocol.startswith("SASL_"):
        ignored.extend(_sasl_kwargs(props, kwargs))
    if protocol in ("SSL", "SASL_SSL"):
        kwargs["ssl_context"] = ssl_context(props)
    return kwargs, sorted(ignored)


def _plain(value: Any) -> Any:
    """The value of a :class:`~mirrorline.api.config.Password` setting, any other value unchanged."""
    return value.value if isinstance(value, Password) else value


def _sasl_kwargs(props: Mapping[str, Any], kwargs: dict[str, Any]) -> list[str]:
    """Set the SASL mechanism and credentials in ``kwargs``; return the keys left unused."""
    mechanism = str(props.get("sasl.mechanism", "GSSAPI")).strip().upper()
    if mechanism not in SASL_MECHANISMS:
        raise ConfigError(f"sasl.mechanism: {mechanism} is not supported by mirrorline's Kafka clients; "
                          f"use one of {', '.join(SASL_MECHANISMS)}")
    kwargs["sasl_mechanism"] = mechanism
    jaas = props.get("sasl.jaas.config")
    if mechanism == "GSSAPI":
        if importlib.util.find_spec("gssapi") is None:  # aiokafka needs it for Kerberos
            raise ConfigError("sasl.mechanism: GSSAPI (Kafka's default when sasl.mechanism is not set) needs the "
                              "Python package 'gssapi'; set sasl.mechanism to PLAIN, SCRAM-SHA-256 or "
                              "SCRAM-SHA-512 if that is what the brokers use")
        # Kerberos credentials come from the ticket cache or KRB5_CLIENT_KTNAME, not from the JAAS options
        return ["sasl.jaas.config"] if jaas is not None else []
    if jaas is None or not str(jaas).strip():
        raise ConfigError(f"sasl.jaas.config: required with sasl.mechanism={mechanism}: e.g. "
                          f"{_example_jaas(mechanism)}")
    module = single_login_module(str(jaas), "sasl.jaas.config")
    if module.simple_name not in _CREDENTIAL_LOGIN_MODULES:
        raise ConfigError(f"sasl.jaas.config: login module {module.class_name} cannot log in with "
                          f"sasl.mechanism={mechanism}; use {_example_jaas(mechanism)}")
    missing = [name for name in ("username", "password") if name not in module.options]
    if missing:
        raise ConfigError(f"sasl.jaas.config: {module.simple_name} needs the option(s) {' and '.join(missing)}")
    kwargs["sasl_plain_username"] = module.options["username"]
    kwargs["sasl_plain_password"] = module.options["password"]
    return []


def _example_jaas(mechanism: str) -> str:
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    return f'org.apache.kafka.common.security.{module} required username="..." password="...";'


# ---------------------------------------------------------------------------------------------
# TLS

def ssl_context(props: Mapping[str, Any]) -> ssl.SSLContext:
    """A client ``SSLContext`` from Java's TLS settings.

    * trust: ``ssl.truststore.location`` (+ ``.password``, ``.type``), or inline PEM
      ``ssl.truststore.certificates``, or ``ssl.cafile`` (PEM); with none of them the system's CAs,
      as Java falls back to its own ``cacerts``;
    * identity (mTLS): ``ssl.keystore.location`` (+ ``.password``, ``.type``) with
      ``ssl.key.password`` when the key has its own password, or inline PEM ``ssl.keystore.key`` +
      ``ssl.keystore.certificate.chain``, or ``ssl.certfile`` / ``ssl.keyfile`` (PEM);
    * ``ssl.endpoint.identification.algorithm``: ``https`` (default) checks the broker's host
      name against its certificate; empty does not (the chain is verified either way);
    * ``ssl.enabled.protocols``: the TLS versions allowed (default TLSv1.2,TLSv1.3).

    Store types are Java's: ``JKS`` (the default), ``PKCS12`` and ``PEM``. As Java's keystores do
    since JDK 9, ``JKS`` and ``PKCS12`` each also read the other format; and a PEM file read
    with the default type is taken as PEM (Java would refuse it), so a PEM CA bundle works
    without ``ssl.truststore.type=PEM``.
    """
    props = {key: _plain(value) for key, value in props.items()}
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the chain and the host name
    trusted = _trusted_certificates(props)
    if trusted is None:
        context.load_default_certs()
    else:
        context.load_verify_locations(cadata="".join(
            cert.public_bytes(serialization.Encoding.PEM).decode() for cert in trusted))
    identity = _identity(props)
    if identity is not None:
        _load_identity(context, *identity)
    algorithm = str(props.get("ssl.endpoint.identification.algorithm", "https")).strip()
    if algorithm == "":
        context.check_hostname = False
    elif algorithm.lower() != "https":
        raise ConfigError(f"ssl.endpoint.identification.algorithm: {algorithm!r} is not supported; "
                          "use https (check the host name) or an empty value (do not)")
    _set_protocols(context, props.get("ssl.enabled.protocols"))
    return context


def trust_pem(props: Mapping[str, Any]) -> str | None:
    """The certificates a client trusts, read from its trust store (JKS, PKCS12 or PEM), as one PEM text.

    None when the settings name no trust store (the system's CAs apply). For clients that read
    PEM only (librdkafka in Spark tasks); ConfigError naming the setting, as for :func:`ssl_context`.
    """
    props = {key: _plain(value) for key, value in props.items()}
    certificates = _trusted_certificates(props)
    if certificates is None:
        return None
    return "".join(cert.public_bytes(serialization.Encoding.PEM).decode() for cert in certificates)


def identity_pem(props: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(certificate chain PEM, private key PEM)`` from a client's key store (JKS, PKCS12 or PEM); None without one.

    The key comes out decrypted (it stays in the process and the job's tasks, as the store's
    password does in the client settings). ConfigError naming the setting, as for :func:`ssl_context`.
    """
    props = {key: _plain(value) for key, value in props.items()}
    found = _identity(props)
    if found is None:
        return None
    key, chain = found
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    return "".join(cert.public_bytes(serialization.Encoding.PEM).decode() for cert in chain), key_pem


_TLS_VERSIONS = {"TLSV1.2": ssl.TLSVersion.TLSv1_2, "TLSV1.3": ssl.TLSVersion.TLSv1_3,
                 "TLSV1.1": ssl.TLSVersion.TLSv1_1, "TLSV1": ssl.TLSVersion.TLSv1}


def _set_protocols(context: ssl.SSLContext, enabled: Any) -> None:
    names = [n.strip().upper() for n in str(enabled or "").split(",") if n.strip()]
    if not names:
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        return
    unknown = [n for n in names if n not in _TLS_VERSIONS]
    if unknown:
        raise ConfigError(f"ssl.enabled.protocols: unknown protocol(s) {', '.join(unknown)}; "
                          "use TLSv1.2 and/or TLSv1.3")
    versions = sorted(_TLS_VERSIONS[n] for n in names)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]


def _trusted_certificates(props: Mapping[str, Any]) -> list[x509.Certificate] | None:
    inline = props.get("ssl.truststore.certificates")
    if inline:
        return _pem_certificates(str(inline).encode(), "ssl.truststore.certificates", "the inline truststore")
    location = props.get("ssl.truststore.location") or props.get("ssl.cafile")
    if not location:
        return None
    key = "ssl.truststore.location" if props.get("ssl.truststore.location") else "ssl.cafile"
    store_type = "PEM" if key == "ssl.cafile" else _store_type(props, "ssl.truststore.type")
    data = _read(key, str(location))
    password = props.get("ssl.truststore.password")
    fmt = _format_of(data, store_type, "ssl.truststore.type", str(location))
    if fmt == "PEM":
        return _pem_certificates(data, key, f"truststore {location}")
    if fmt == "JKS":
        store = _load_jks(data, password, "ssl.truststore.password", f"truststore {location}")
        certs = [x509.load_der_x509_certificate(entry.cert) for entry in store.certs.values()]
        # Java also trusts the leaf certificate of a key entry found in a truststore
        certs += [x509.load_der_x509_certificate(entry.cert_chain[0][1]) for entry in store.private_keys.values()
                  if entry.cert_chain]
    else:
        p12 = _load_pkcs12(data, password, "ssl.truststore.password", f"truststore {location}")
        certs = ([p12.cert.certificate] if p12.cert else []) + [c.certificate for c in p12.additional_certs]
    if not certs:
        raise ConfigError(f"{key}: truststore {location} holds no certificates")
    return certs


def _identity(props: Mapping[str, Any]) -> tuple[Any, list[x509.Certificate]] | None:
    """``(private key, certificate chain)`` of the client, or None without a keystore."""
    key_password = props.get("ssl.key.password")
    inline_key, inline_chain = props.get("ssl.keystore.key"), props.get("ssl.keystore.certificate.chain")
    if inline_key or inline_chain:
        if not (inline_key and inline_chain):
            raise ConfigError("ssl.keystore.key and ssl.keystore.certificate.chain must be given together")
        key = _pem_private_key(str(inline_key).encode(), key_password, "ssl.keystore.key", "the inline keystore")
        return key, _pem_certificates(str(inline_chain).encode(), "ssl.keystore.certificate.chain",
                                      "the inline keystore")
    location = props.get("ssl.keystore.location")
    if not location:
        certfile = props.get("ssl.certfile")
        if not certfile:
            return None
        data = _read("ssl.certfile", str(certfile))
        keyfile = props.get("ssl.keyfile")
        key_data = _read("ssl.keyfile", str(keyfile)) if keyfile else data
        return (_pem_private_key(key_data, key_password, "ssl.keyfile" if keyfile else "ssl.certfile",
                                 f"key file {keyfile or certfile}"),
                _pem_certificates(data, "ssl.certfile", f"certificate file {certfile}"))
    data = _read("ssl.keystore.location", str(location))
    password = props.get("ssl.keystore.password")
    where = f"keystore {location}"
    fmt = _format_of(data, _store_type(props, "ssl.keystore.type"), "ssl.keystore.type", str(location))
    if fmt == "PEM":
        # Kafka's PEM keystore: the key is protected by ssl.key.password (never the store password)
        return (_pem_private_key(data, key_password or password, "ssl.keystore.location", where),
                _pem_certificates(data, "ssl.keystore.location", where))
    if fmt == "JKS":
        store = _load_jks(data, password, "ssl.keystore.password", where)
        if not store.private_keys:
            raise ConfigError(f"ssl.keystore.location: {where} holds no private key entry")
        entry = next(iter(store.private_keys.values()))
        if not entry.is_decrypted():
            if not key_password:
                raise ConfigError(f"ssl.keystore.password: cannot decrypt the private key in {where} with the "
                                  "store password; set ssl.key.password to the key's own password")
            try:
                entry.decrypt(str(key_password))
            except Exception:
                raise ConfigError(f"ssl.key.password: wrong password for the private key in {where}") from None
        key = serialization.load_der_private_key(entry.pkey_pkcs8, None)
        return key, [x509.load_der_x509_certificate(der) for _, der in entry.cert_chain]
    p12 = _load_pkcs12(data, password, "ssl.keystore.password", where)
    if p12.key is None or p12.cert is None:
        raise ConfigError(f"ssl.keystore.location: {where} holds no private key with its certificate")
    return p12.key, [p12.cert.certificate, *(c.certificate for c in p12.additional_certs)]


def _load_identity(context: ssl.SSLContext, key: Any, chain: list[x509.Certificate]) -> None:
    """Give ``context`` the client's key and chain.

    Python's ``ssl`` module loads keys only from files, so they pass through a temporary file:
    created by ``mkstemp`` (mode 0600, readable by this user only), holding the key encrypted with
    a one-time random password, and deleted as soon as OpenSSL has read it.
    """
    one_time = secrets.token_urlsafe(24)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.BestAvailableEncryption(one_time.encode()))
    pem += b"".join(cert.public_bytes(serialization.Encoding.PEM) for cert in chain)
    fd, path = tempfile.mkstemp(prefix="mirrorline-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
        context.load_cert_chain(path, password=one_time)
    finally:
        os.unlink(path)


def _store_type(props: Mapping[str, Any], key: str) -> str:
    store_type = str(props.get(key) or "JKS").strip().upper()
    if store_type not in ("JKS", "PKCS12", "PEM"):
        raise ConfigError(f"{key}: {store_type} is not supported; use JKS, PKCS12 or PEM")
    return store_type


def _read(key: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{key}: file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {path}: {exc.strerror or exc}") from None


_JKS_MAGIC = (b"\xfe\xed\xfe\xed", b"\xce\xce\xce\xce")  # JKS, JCEKS


def _format_of(data: bytes, store_type: str, type_key: str, path: str) -> str:
    """``JKS``, ``PKCS12`` or ``PEM``: what the file is, given the configured type (see ssl_context)."""
    is_pem = data.lstrip().startswith(b"-----BEGIN ")
    if store_type == "PEM":
        if not is_pem:
            raise ConfigError(f"{type_key}: PEM, but {path} is not a PEM file")
        return "PEM"
    if is_pem:
        return "PEM"
    return "JKS" if data[:4] in _JKS_MAGIC else "PKCS12"


def _load_jks(data: bytes, password: Any, password_key: str, where: str):
    import jks  # pyjks

    try:
        return jks.KeyStore.loads(data, None if password is None else str(password))
    except jks.util.KeystoreSignatureException:
        raise ConfigError(f"{password_key}: wrong password for {where}") from None
    except Exception:
        raise ConfigError(f"{password_key}: cannot read {where}: not a valid JKS store") from None


def _load_pkcs12(data: bytes, password: Any, password_key: str, where: str):
    try:
        return pkcs12.load_pkcs12(data, None if password is None else str(password).encode())
    except Exception:
        # cryptography cannot tell a wrong password from a damaged file
        raise ConfigError(f"{password_key}: wrong password for {where} (or not a JKS/PKCS12 file)") from None


def _pem_certificates(data: bytes, key: str, where: str) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError:
        raise ConfigError(f"{key}: {where} holds no readable PEM certificate") from None


def _pem_private_key(data: bytes, password: Any, key: str, where: str):
    match = re.search(rb"-----BEGIN ([A-Z ]*)PRIVATE KEY-----.*?-----END \1PRIVATE KEY-----", data, re.S)
    if match is None:
        raise ConfigError(f"{key}: {where} holds no PEM private key")
    encrypted = match.group(1).startswith(b"ENCRYPTED") or b"Proc-Type: 4,ENCRYPTED" in match.group(0)
    if encrypted and not password:
        raise ConfigError(f"ssl.key.password: required, the private key in {where} is encrypted")
    try:
        return serialization.load_pem_private_key(match.group(0), str(password).encode() if encrypted else None)
    except (ValueError, TypeError):
        if encrypted:
            raise ConfigError(f"ssl.key.password: wrong password for the private key in {where}") from None
        raise ConfigError(f"{key}: cannot read the private key in {where}") from None


# ---------------------------------------------------------------------------------------------
# Telling a refused login or an untrusted certificate from a broker that is down

async def security_problem(props: Mapping[str, Any], timeout_s: float = 10.0) -> str | None:
    """Why these client settings cannot log in to the cluster, or None.

    aiokafka's clients report any failed bootstrap as "Unable to bootstrap"; this connects to
    the bootstrap servers one at a time, as the clients would, and returns one line naming the
    cause when a broker answered but refused the settings: an untrusted certificate or a host
    name it does not match, a failed TLS handshake, a refused SASL login or mechanism. None when
    a connection succeeds, or when no broker can be reached at all (that may pass; the caller's
    own error says it). ConfigError for settings that are wrong before any connection.
    """
    from aiokafka import errors as kafka_errors
    from aiokafka.conn import create_conn

    kwargs, _ = client_kwargs(props, "admin")
    security = {k: v for k, v in kwargs.items() if k in (
        "security_protocol", "ssl_context", "sasl_mechanism", "sasl_plain_username", "sasl_plain_password",
        "sasl_kerberos_service_name")}
    mechanism = security.get("sasl_mechanism")
    who = f" as {security['sasl_plain_username']!r}" if "sasl_plain_username" in security else ""
    for server in str(props.get("bootstrap.servers", "")).split(","):
        host, _, port = server.strip().rpartition(":")
        if not host or not port.isdigit():
            continue
        try:
            async with asyncio.timeout(timeout_s):
                conn = await create_conn(host.strip("[]"), int(port), request_timeout_ms=int(timeout_s * 1000),
                                         **security)
        except ssl.SSLCertVerificationError as exc:
            return (f"TLS: the certificate of {server.strip()} is not trusted ({exc.verify_message}); check "
                    "ssl.truststore.* (the CA that signed the brokers' certificates) and, for a host name "
                    "mismatch, ssl.endpoint.identification.algorithm")
        except ssl.SSLError as exc:
            return (f"TLS handshake with {server.strip()} failed ({exc.reason or exc.__class__.__name__}); check "
                    "security.protocol and ssl.* against the broker's listener")
        except (kafka_errors.UnsupportedSaslMechanismError, kafka_errors.IllegalSaslStateError):
            return (f"SASL: {server.strip()} does not accept sasl.mechanism={mechanism}; check sasl.mechanism "
                    "against the broker's listener")
        except kafka_errors.KafkaError as exc:
            text = f"{exc.__class__.__name__} {exc}".lower()
            if "sasl" in text or "authenticat" in text:
                return (f"SASL: {server.strip()} refused the login{who} with sasl.mechanism={mechanism} "
                        "(wrong user name or password in sasl.jaas.config, or no such user)")
            continue
        except (OSError, asyncio.TimeoutError):
            continue
        conn.close()
        return None
    return None
