"""TLS material for tests, made on the spot: a private CA, a server certificate, a client certificate.

:func:`write_tls_material` writes, into one directory, the stores Kafka users hand to Java
clients and brokers, in the three formats they use: PEM files, PKCS12 stores and JKS stores
(JKS written with ``pyjks``; nothing shells out to keytool). The server certificate names
``127.0.0.1`` (IP) and ``localhost`` (DNS) in its subjectAltName, so host-name verification
(``ssl.endpoint.identification.algorithm=https``, the default) passes against a loopback broker.

Keys are EC P-256: quick to make, and read by Java, OpenSSL and pyjks alike.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Identity:
    """A private key and its certificate chain (leaf first; the CA's own chain is just itself)."""

    key: ec.EllipticCurvePrivateKey
    chain: tuple[x509.Certificate, ...]

    @property
    def certificate(self) -> x509.Certificate:
        """The leaf certificate."""
        return self.chain[0]


@dataclass(frozen=True)
class TlsFiles:
    """Paths of everything :func:`write_tls_material` wrote, and the one password protecting them."""

    directory: Path
    password: str
    ca_pem: Path
    truststore_jks: Path
    truststore_p12: Path
    server_keystore_p12: Path
    server_keystore_jks: Path
    server_keystore_pem: Path
    client_keystore_p12: Path | None = None
    client_keystore_jks: Path | None = None
    client_keystore_pem: Path | None = None


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "mirrorline tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _validity(builder: x509.CertificateBuilder, days: int) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return builder.not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=days))


def make_ca(common_name: str = "mirrorline test CA", days: int = 30) -> Identity:
    """A self-signed certificate authority."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name)
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, encipher_only=False,
                                            decipher_only=False), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False))
    return Identity(key, (_validity(builder, days).sign(key, hashes.SHA256()),))


def issue(ca: Identity, common_name: str, *, server: bool, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
          days: int = 30) -> Identity:
    """A certificate signed by ``ca``: for a server (``hosts`` in its SAN) or for a client (mTLS)."""
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (x509.CertificateBuilder().subject_name(_name(common_name)).issuer_name(ca.certificate.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, key_agreement=True,
                                            key_cert_sign=False, crl_sign=False, content_commitment=False,
                                            data_encipherment=False, encipher_only=False, decipher_only=False),
                              critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
                              critical=False))
    if server and sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return Identity(key, (_validity(builder, days).sign(ca.key, hashes.SHA256()), *ca.chain))


def pem_certificates(certificates) -> bytes:
    """Certificates as concatenated PEM blocks."""
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certificates)


def write_pem_keystore(path: Path, identity: Identity, key_password: str | None) -> Path:
    """Private key (PKCS#8, encrypted when ``key_password``) followed by its chain: Kafka's PEM keystore."""
    encryption = (serialization.BestAvailableEncryption(key_password.encode()) if key_password
                  else serialization.NoEncryption())
    key = identity.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    _write_private(path, key + pem_certificates(identity.chain))
    return path


def write_pkcs12_keystore(path: Path, identity: Identity, password: str, alias: str = "mirrorline") -> Path:
    """A PKCS12 keystore holding one private key entry (key and chain)."""
    data = pkcs12.serialize_key_and_certificates(alias.encode(), identity.key, identity.certificate,
                                                 list(identity.chain[1:]),
                                                 serialization.BestAvailableEncryption(password.encode()))
    _write_private(path, data)
    return path


def write_pkcs12_truststore(path: Path, certificates, password: str) -> Path:
    """A PKCS12 truststore whose certificates Java treats as trusted entries."""
    entries = [pkcs12.PKCS12Certificate(cert, f"ca{i}".encode()) for i, cert in enumerate(certificates)]
    data = pkcs12.serialize_java_truststore(entries, serialization.BestAvailableEncryption(password.encode()))
    _write_private(path, data)
    return path


def write_jks_truststore(path: Path, certificates, password: str) -> Path:
    """A JKS truststore of trusted-certificate entries."""
    import jks

    entries = [jks.TrustedCertEntry.new(f"ca{i}", cert.public_bytes(serialization.Encoding.DER))
               for i, cert in enumerate(certificates)]
    _write_private(path, jks.KeyStore.new("jks", entries).saves(password))
    return path


def write_jks_keystore(path: Path, identity: Identity, password: str, key_password: str | None = None,
                       alias: str = "mirrorline") -> Path:
    """A JKS keystore holding one private key entry; the key is protected by ``key_password``
    (default: the store password, as keytool does)."""
    import jks

    pkcs8 = identity.key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption())
    entry = jks.PrivateKeyEntry.new(alias, [c.public_bytes(serialization.Encoding.DER) for c in identity.chain],
                                    pkcs8, "pkcs8")
    entry.encrypt(key_password or password)
    _write_private(path, jks.KeyStore.new("jks", [entry]).saves(password))
    return path


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o600)


def write_tls_material(directory: Path, password: str = "changeit", *, ca: Identity | None = None,
                       server_name: str = "localhost", client_name: str | None = None) -> TlsFiles:
    """Write a CA (``ca``, or a new one), a server identity and optionally a client identity.

    Files: ``ca.pem``, ``truststore.jks``, ``truststore.p12`` (the CA), ``server.p12``,
    ``server.jks``, ``server.pem`` (key encrypted with ``password``, then chain) and, with
    ``client_name``, ``client.p12`` / ``client.jks`` / ``client.pem``. Every store uses ``password``.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ca = ca or make_ca()
    server = issue(ca, server_name, server=True)
    ca_pem = directory / "ca.pem"
    ca_pem.write_bytes(pem_certificates(ca.chain))
    files = dict(
        directory=directory, password=password, ca_pem=ca_pem,
        truststore_jks=write_jks_truststore(directory / "truststore.jks", ca.chain, password),
        truststore_p12=write_pkcs12_truststore(directory / "truststore.p12", ca.chain, password),
        server_keystore_p12=write_pkcs12_keystore(directory / "server.p12", server, password),
        server_keystore_jks=write_jks_keystore(directory / "server.jks", server, password),
        server_keystore_pem=write_pem_keystore(directory / "server.pem", server, password),
    )
    if client_name:
        client = issue(ca, client_name, server=False)
        files.update(client_keystore_p12=write_pkcs12_keystore(directory / "client.p12", client, password),
                     client_keystore_jks=write_jks_keystore(directory / "client.jks", client, password),
                     client_keystore_pem=write_pem_keystore(directory / "client.pem", client, password))
    return TlsFiles(**files)
