"""One single-node Apache Kafka cluster (combined broker + controller, KRaft) on loopback.

A cluster owns a directory holding its ``server.properties``, its data, its log and the PID
of its JVM. Storage is formatted once with the cluster's own id, so restarting a stopped
cluster keeps its topics. The JVM is started in its own session so that it outlives the
command that started it, and it is only ever stopped by the PID recorded at start, after
checking that the PID still belongs to this cluster's JVM.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mirrorline.localkafka.artifacts import java_executable, resolve_kafka_classpath
from mirrorline.localkafka.errors import LocalKafkaError

#: Modest heap: two brokers, a worker and the tests must share 2 cores / 24 GiB.
DEFAULT_HEAP = os.environ.get("MIRRORLINE_KAFKA_HEAP", "-Xms128m -Xmx512m")

_SERVER_PROPERTIES = """\
# Written by mirrorline local-kafka for cluster {name}
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={data_dir}
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=3
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.segment.bytes=67108864
"""

#: The client listener when it is not PLAINTEXT: SASL_PLAINTEXT (``sasl_users``), SSL (``tls``) or
#: SASL_SSL (both). The controller listener stays PLAINTEXT; the broker talks to itself over the
#: client listener (as ``admin`` with SASL/PLAIN when SASL is on).
_SECURED_LISTENER = """\
listeners={protocol}://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners={protocol}://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name={protocol}
listener.security.protocol.map=CONTROLLER:PLAINTEXT,{protocol}:{protocol}
"""
#: SASL on the client listener: PLAIN always (users in the JAAS config), SCRAM with ``scram``.
_SASL = """\
sasl.enabled.mechanisms={mechanisms}
sasl.mechanism.inter.broker.protocol=PLAIN
listener.name.{listener}.sasl.enabled.mechanisms={mechanisms}
listener.name.{listener}.plain.sasl.jaas.config={jaas}
"""
_SCRAM = """\
listener.name.{listener}.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.{listener}.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
"""
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
#: TLS on the client listener (``tls``): the broker's key in PKCS12, the CA it trusts (itself, as a
#: client of its own listener) in PEM. Both are made at first start under ``<home>/tls``.
_TLS = """\
ssl.keystore.type=PKCS12
ssl.keystore.location={keystore}
ssl.keystore.password={password}
ssl.truststore.type=PEM
ssl.truststore.location={truststore}
ssl.client.auth=none
"""
#: Password of every store under ``<home>/tls`` (test material, made for this cluster only).
TLS_PASSWORD = "local-kafka-tls"
_PLAINTEXT_LISTENER = """\
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
"""

#: What an mm2.properties needs for clusters of one broker (these local ones): every topic MM2
#: creates with replication factor 1, where MM2's defaults ask for 3.
SINGLE_BROKER_MM2_PROPERTIES = """\
replication.factor = 1
offset-syncs.topic.replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
config.storage.replication.factor = 1
offset.storage.replication.factor = 1
status.storage.replication.factor = 1
"""

#: The broker's own SASL user (inter-broker and readiness probes) unless ``sasl_users`` names ``admin``.
SASL_ADMIN_USER = "admin"
SASL_ADMIN_PASSWORD = "admin-secret"

#: Kafka's KRaft ACL authorizer (ClusterSpec.authorizer). With no ACL on a resource only super users may
#: use it (``allow.everyone.if.no.acl.found`` stays at its default, false). The broker authenticates to
#: itself as ``admin`` over the SASL listener; over the PLAINTEXT controller listener it registers and
#: heartbeats as ``User:ANONYMOUS``, which needs CLUSTER_ACTION, so both are super users. No client can be
#: ANONYMOUS: the only client listener refuses unauthenticated connections.
_AUTHORIZER = """\
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users={super_users}
"""


def _jaas_quote(text: str) -> str:
    if any(c in text for c in '"\\;\n\r'):
        raise LocalKafkaError(f"SASL user names and passwords may not contain quotes, backslashes, ';' or newlines: {text!r}")
    return text


def _scram_quote(text: str) -> str:
    if not text or any(c in text for c in ',[]="\\') or any(c.isspace() for c in text):
        raise LocalKafkaError(f"SCRAM user names and passwords may not be empty nor contain ',[]=\"\\' or "
                              f"blanks: {text!r}")
    return text


def render_server_properties(spec: "ClusterSpec", data_dir: Path) -> str:
    """The ``server.properties`` of a cluster: PLAINTEXT, or SASL_PLAINTEXT/PLAIN with ``sasl_users``.

    ``spec.tls`` puts TLS on the client listener (SSL, or SASL_SSL with ``sasl_users``);
    ``spec.scram`` enables SCRAM-SHA-256/512 beside PLAIN; ``spec.authorizer`` adds Kafka's
    StandardAuthorizer (requires ``sasl_users``).
    """
    text = _SERVER_PROPERTIES.format(name=spec.name, port=spec.port, controller_port=spec.controller_port,
                                     data_dir=data_dir)
    if spec.authorizer and not spec.sasl_users:
        raise LocalKafkaError(f"cluster {spec.name}: an authorizer needs SASL users (sasl_users) to tell "
                              "principals apart")
    if spec.scram and not spec.sasl_users:
        raise LocalKafkaError(f"cluster {spec.name}: SCRAM needs SASL users (sasl_users)")
    if not spec.sasl_users and not spec.tls:
        return text
    plain = _PLAINTEXT_LISTENER.format(port=spec.port, controller_port=spec.controller_port)
    assert plain in text
    protocol = spec.security_protocol
    text = text.replace(plain, _SECURED_LISTENER.format(protocol=protocol, port=spec.port,
                                                        controller_port=spec.controller_port))
    if spec.tls:
        text += _TLS.format(keystore=spec.tls_dir / "server.p12", truststore=spec.tls_dir / "ca.pem",
                            password=TLS_PASSWORD)
    if not spec.sasl_users:
        return text
    admin_password = spec.sasl_admin_credentials()[1]
    users = {SASL_ADMIN_USER: admin_password, **spec.sasl_users}
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{SASL_ADMIN_USER}" password="{_jaas_quote(admin_password)}"'
            + "".join(f' user_{_jaas_quote(u)}="{_jaas_quote(p)}"' for u, p in users.items()) + ";")
    mechanisms = ",".join(("PLAIN", *SCRAM_MECHANISMS) if spec.scram else ("PLAIN",))
    listener = protocol.lower()
    text += _SASL.format(mechanisms=mechanisms, listener=listener, jaas=jaas)
    if spec.scram:
        text += _SCRAM.format(listener=listener)
    if spec.authorizer:
        supers = [SASL_ADMIN_USER, "ANONYMOUS", *(u for u in spec.super_users or () if u != SASL_ADMIN_USER)]
        text += _AUTHORIZER.format(super_users=";".join(f"User:{u}" for u in supers))
    return text


@dataclass(frozen=True)
class ClusterSpec:
    """Where one local cluster lives and listens."""

    name: str
    port: int
    controller_port: int
    home: Path
    #: username -> password: the client listener is SASL_PLAINTEXT with mechanism PLAIN and
    #: refuses unauthenticated clients. None (default): a PLAINTEXT listener, no authentication.
    sasl_users: dict[str, str] | None = field(default=None, compare=False, hash=False)
    #: Run Kafka's KRaft ACL authorizer (StandardAuthorizer) with ``admin`` as the super user: every
    #: other SASL user may do only what ACLs grant it. Needs ``sasl_users``. Default: no authorizer.
    authorizer: bool = field(default=False, compare=False, hash=False)
    #: TLS on the client listener (SASL_SSL with ``sasl_users``, else SSL), with a CA and a server
    #: certificate for 127.0.0.1/localhost made at first start under ``<home>/tls`` (see :attr:`tls_dir`).
    tls: bool = field(default=False, compare=False, hash=False)
    #: Also enable SCRAM-SHA-256 and SCRAM-SHA-512 (beside PLAIN); every SASL user, ``admin`` included,
    #: gets SCRAM credentials when the storage is formatted (first start only). Needs ``sasl_users``.
    scram: bool = field(default=False, compare=False, hash=False)
    #: SASL users the authorizer treats as super users, besides ``admin``.
    super_users: list[str] | None = field(default=None, compare=False, hash=False)

    @property
    def bootstrap_servers(self) -> str:
        """The address any Kafka client connects to."""
        return f"127.0.0.1:{self.port}"

    @property
    def security_protocol(self) -> str:
        """The client listener's protocol: PLAINTEXT, SASL_PLAINTEXT, SSL or SASL_SSL."""
        if self.tls:
            return "SASL_SSL" if self.sasl_users else "SSL"
        return "SASL_PLAINTEXT" if self.sasl_users else "PLAINTEXT"

    @property
    def tls_dir(self) -> Path:
        """Where a ``tls`` cluster keeps its CA and stores (mirrorline.localkafka.tls's file names:
        ``ca.pem``, ``truststore.jks``, ``truststore.p12``, ``server.p12`` ...; password :data:`TLS_PASSWORD`)."""
        return self.home / "tls"

    def sasl_admin_credentials(self) -> tuple[str, str]:
        """``(user, password)`` the broker itself authenticates with (also used to probe readiness)."""
        return SASL_ADMIN_USER, (self.sasl_users or {}).get(SASL_ADMIN_USER, SASL_ADMIN_PASSWORD)

    def client_properties(self, user: str | None = None, mechanism: str = "PLAIN") -> dict[str, str]:
        """Java-style client settings reaching this cluster (as ``user`` when SASL is on; default admin).

        ``mechanism``: PLAIN, or SCRAM-SHA-256/512 on a ``scram`` cluster. A ``tls`` cluster's
        settings trust its CA through the JKS truststore under :attr:`tls_dir`.
        """
        props = {"bootstrap.servers": self.bootstrap_servers}
        if self.sasl_users:
            name, password = self.sasl_admin_credentials()
            if user is not None and user != name:
                name, password = user, self.sasl_users[user]
            module = ("plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule")
            props.update({
                "security.protocol": self.security_protocol, "sasl.mechanism": mechanism,
                "sasl.jaas.config": f"org.apache.kafka.common.security.{module} required "
                                    f'username="{name}" password="{password}";',
            })
        if self.tls:
            props.update({"security.protocol": self.security_protocol,
                          "ssl.truststore.location": str(self.tls_dir / "truststore.jks"),
                          "ssl.truststore.password": TLS_PASSWORD})
        return props


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (Kafka's ``Uuid``)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):  # Kafka avoids ids that look like CLI flags
            return cluster_id


def port_is_free(port: int) -> bool:
    """True when nothing listens on 127.0.0.1:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) still answers kill(0).
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _run_coroutine_blocking(coro):
    """Run a coroutine to completion from sync code, even when the caller has a running loop."""
    result: dict = {}

    def runner() -> None:
        try:
            result["value"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised in the caller's thread
            result["error"] = exc

    thread = threading.Thread(target=runner)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result.get("value")


async def _broker_answers(props: dict[str, str]) -> bool:
    """True once the broker serves metadata listing itself (registered with the controller).

    ``props``: Java-style client settings reaching the cluster (:meth:`ClusterSpec.client_properties`:
    SASL as its admin user, TLS trusting its CA).
    """
    from mirrorline.clients.admin import KafkaAdmin

    admin = KafkaAdmin.from_settings({**props, "request.timeout.ms": 3000})
    try:
        await admin.start()
        return bool((await admin.describe_cluster()).brokers)
    except Exception:
        return False
    finally:
        await admin.close()


class LocalCluster:
    """Formats, starts, probes and stops one local cluster described by a ClusterSpec."""

    def __init__(self, spec: ClusterSpec, heap: str = DEFAULT_HEAP):
        self.spec = spec
        self.heap = heap

    # -- paths ---------------------------------------------------------------------------
    @property
    def data_dir(self) -> Path:
        return self.spec.home / "data"

    @property
    def config_file(self) -> Path:
        return self.spec.home / "server.properties"

    @property
    def pid_file(self) -> Path:
        return self.spec.home / "broker.pid"

    @property
    def log_file(self) -> Path:
        return self.spec.home / "server.log"

    @property
    def meta_file(self) -> Path:
        return self.spec.home / "cluster.json"

    # -- state ---------------------------------------------------------------------------
    def pid(self) -> int | None:
        """The recorded PID of this cluster's JVM if that process is still this cluster's JVM."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        if not _pid_alive(pid):
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            return pid  # no /proc: trust the PID file
        return pid if str(self.config_file) in cmdline else None

    def is_running(self) -> bool:
        """True when this cluster's JVM is alive."""
        return self.pid() is not None

    def cluster_id(self) -> str | None:
        """The id the storage was formatted with, or None before the first start."""
        try:
            return json.loads(self.meta_file.read_text())["cluster_id"]
        except (OSError, ValueError, KeyError):
            return None

    # -- lifecycle -----------------------------------------------------------------------
    def start(self, timeout: float = 90.0) -> None:
        """Start the cluster and return once its broker answers Kafka requests.

        Harmless when the cluster already runs. Raises LocalKafkaError when a port is
        taken by another process, the jars cannot be fetched, or the broker does not come up.
        """
        if self.is_running():
            self.wait_ready(timeout)
            return
        for port in (self.spec.port, self.spec.controller_port):
            if not port_is_free(port):
                raise LocalKafkaError(
                    f"cannot start cluster {self.spec.name}: port {port} on 127.0.0.1 is taken by another "
                    f"process; stop it or choose other ports (--base-port)"
                )
        libs = resolve_kafka_classpath()
        java = java_executable()
        self.spec.home.mkdir(parents=True, exist_ok=True)
        if self.spec.tls and not (self.spec.tls_dir / "server.p12").exists():
            from mirrorline.localkafka.tls import write_tls_material

            write_tls_material(self.spec.tls_dir, TLS_PASSWORD, server_name=f"local-kafka-{self.spec.name}")
        self.config_file.write_text(render_server_properties(self.spec, self.data_dir))
        classpath = f"{libs}/*"
        if self.cluster_id() is None or not (self.data_dir / "meta.properties").exists():
            self._format(java, classpath)
        log4j = Path(__file__).with_name("log4j2.properties")
        cmd = [java, *self.heap.split(), "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
               "-Djava.awt.headless=true", f"-Dkafka.logs.dir={self.spec.home}",
               f"-Dlog4j2.configurationFile={log4j}", "-cp", classpath,
               "kafka.Kafka", str(self.config_file)]
        with open(self.spec.home / "stdout.log", "ab") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, cwd=self.spec.home)
        self.pid_file.write_text(f"{proc.pid}\n")
        try:
            self.wait_ready(timeout, proc)
        except LocalKafkaError:
            self.stop()
            raise

    def record(self, **fields) -> None:
        """Write the cluster's spec (and any extra fields) to its ``cluster.json``, keeping what is there."""
        self.spec.home.mkdir(parents=True, exist_ok=True)
        try:
            meta = json.loads(self.meta_file.read_text())
        except (OSError, ValueError):
            meta = {}
        meta.update(fields, spec=_spec_json(self.spec))
        self.meta_file.write_text(json.dumps(meta))

    def _format(self, java: str, classpath: str) -> None:
        cluster_id = new_cluster_id()
        result = subprocess.run(
            [java, "-Xmx256m", "-cp", classpath, "kafka.tools.StorageTool", "format", "-t", cluster_id,
             "-c", str(self.config_file), "--standalone", "--ignore-formatted", *self._scram_arguments()],
            capture_output=True, text=True,
        )
        if result.returncode != 0:
            tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
            raise LocalKafkaError(f"formatting storage of cluster {self.spec.name} failed: {tail[0]}")
        self.record(cluster_id=cluster_id)

    def _scram_arguments(self) -> list[str]:
        """``--add-scram`` arguments creating every SASL user's SCRAM credentials (``scram`` clusters)."""
        if not (self.spec.scram and self.spec.sasl_users):
            return []
        users = dict([self.spec.sasl_admin_credentials()], **self.spec.sasl_users)
        return [arg for user, password in users.items() for mechanism in SCRAM_MECHANISMS
                for arg in ("--add-scram", f"{mechanism}=[name={_scram_quote(user)},password={_scram_quote(password)}]")]

    def wait_ready(self, timeout: float = 90.0, proc: subprocess.Popen | None = None) -> None:
        """Block until the broker answers a metadata request, or raise LocalKafkaError."""
        deadline = time.monotonic() + timeout
        props = self.spec.client_properties()
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise LocalKafkaError(
                    f"the broker of cluster {self.spec.name} exited with code {proc.returncode}: "
                    f"{self._last_error_line()} (full log: {self.log_file})"
                )
            if not port_is_free(self.spec.port) and _run_coroutine_blocking(
                    _broker_answers(props)):
                return
            time.sleep(0.25)
        raise LocalKafkaError(
            f"the broker of cluster {self.spec.name} did not answer within {timeout:.0f}s "
            f"(log: {self.log_file})"
        )

    def _last_error_line(self) -> str:
        for path in (self.log_file, self.spec.home / "stdout.log"):
            try:
                lines = path.read_text(errors="replace").splitlines()
            except OSError:
                continue
            for line in reversed(lines):
                if "ERROR" in line or "Exception" in line:
                    return line.strip()[:300]
        return "no error in its log"

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop the JVM by its recorded PID (SIGTERM, then SIGKILL). True if it was running."""
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _pid_alive(pid):
            _reap(pid)
            time.sleep(0.1)
        if _pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
            while _pid_alive(pid):
                _reap(pid)
                time.sleep(0.05)
        self.pid_file.unlink(missing_ok=True)
        return True


def _reap(pid: int) -> None:
    """Collect the exit status when the JVM is our own child (tests), so it does not linger as a zombie."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _spec_json(spec: ClusterSpec) -> dict:
    data = asdict(spec)
    data["home"] = str(spec.home)
    if not spec.sasl_users:
        data.pop("sasl_users")  # unchanged cluster.json for plain clusters
    for option in ("authorizer", "tls", "scram", "super_users"):  # unchanged cluster.json without them
        if not data[option]:
            data.pop(option)
    return data
