"""The Helm chart (deploy/helm/mirrorline) renders valid Kubernetes objects that run what we mean.

Needs no Kafka, so it is not marked integration and runs in every CI run. Helm is built once
from its Go module by ``scripts/helm`` (about two minutes cold on a 2-core machine, cached in
``~/.cache/mirrorline/helm-<version>`` afterwards): the first call waits for that build.

Every rendered object is checked against the Kubernetes OpenAPI schemas bundled with
``kubernetes-validate`` (strict: unknown fields are errors), for the oldest Kubernetes the chart
supports and the newest the package knows. The ServiceMonitor is a CRD kind those schemas do not
have, so it is checked by hand and skipped by the validator, deliberately.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from mirrorline.connectors.mm2.mm2_config import MirrorMakerConfig
from mirrorline.connectors.mm2.command import worker_specs
from mirrorline.clients.configfile import parse_properties
from mirrorline.runtime.worker_config import DISTRIBUTED_CONFIG_DEF

# generous: the first test may build Helm from source (scripts/helm) before rendering anything
pytestmark = pytest.mark.timeout(1800)

ROOT = Path(__file__).resolve().parents[2]
HELM = ROOT / "scripts" / "helm"
CHART = ROOT / "deploy" / "helm" / "mirrorline"
#: Kubernetes versions every object is validated against: the chart's kubeVersion floor, and the newest bundled.
KUBE_VERSIONS = ("1.25", kubernetes_validate.latest_version())
#: Kinds defined by CRDs, which kubernetes-validate has no schema for.
CRD_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}
BUILD_TIMEOUT_S = 1500


def helm(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``scripts/helm ARGS``; with ``check``, fail the test showing helm's stderr."""
    result = subprocess.run([str(HELM), *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if check and result.returncode != 0:
        pytest.fail(f"scripts/helm {' '.join(args)} exited {result.returncode}:\n{result.stderr}")
    return result


@pytest.fixture(scope="module", autouse=True)
def built_helm() -> None:
    """Build (or find cached) helm once, streaming the build's progress to the terminal."""
    start = time.monotonic()
    print(f"\n[helm] scripts/helm version (builds Helm from source on first use; up to {BUILD_TIMEOUT_S} s)",
          file=sys.stderr, flush=True)
    proc = subprocess.Popen([str(HELM), "version", "--short"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=ROOT)
    lines = []
    for line in proc.stdout:  # the build's own progress ("go: downloading ...", "built Helm in N s")
        lines.append(line)
        if line.startswith("scripts/helm"):
            print(f"[helm] {line.rstrip()}", file=sys.stderr, flush=True)
    code = proc.wait(timeout=BUILD_TIMEOUT_S)
    assert code == 0, "scripts/helm could not build or run helm:\n" + "".join(lines[-40:])
    print(f"[helm] ready ({lines[-1].strip()}) after {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)


def render(*args: str) -> list[dict]:
    """``helm template`` of the chart (release ``mirrorline``, namespace ``mirrorline``) as objects."""
    out = helm("template", "mirrorline", str(CHART), "--namespace", "mirrorline", *args).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def render_values(name: str, *args: str) -> list[dict]:
    """The chart rendered with ``values-<name>.yaml`` plus ``args``."""
    return render("-f", str(CHART / f"values-{name}.yaml"), *args)


def by_kind(objects: list[dict]) -> dict[str, dict]:
    """Objects by kind (the chart makes at most one of each)."""
    kinds = [obj["kind"] for obj in objects]
    assert len(kinds) == len(set(kinds)), kinds
    return {obj["kind"]: obj for obj in objects}


def validate_all(objects: list[dict]) -> None:
    """Every object against the Kubernetes schemas (strict), except CRD kinds."""
    for obj in objects:
        if (obj["apiVersion"], obj["kind"]) in CRD_KINDS:
            continue
        for version in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                pytest.fail(f"{obj['kind']} {obj['metadata']['name']} is invalid for Kubernetes {version}: {exc}")


def container(deployment: dict) -> dict:
    """The mirrorline container of a Deployment."""
    (main,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "mirrorline"]
    return main


def assert_runs_safely(deployment: dict, port: int = 8083) -> None:
    """Non-root, probes on the HTTP port, resource requests and limits."""
    pod = deployment["spec"]["template"]["spec"]
    main = container(deployment)
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    for c in pod["containers"] + pod.get("initContainers", []):
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert main["ports"] == [{"name": "http", "containerPort": port, "protocol": "TCP"}]
    assert main["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert main["livenessProbe"]["httpGet"] == {"path": "/", "port": "http"}
    assert main["startupProbe"]["httpGet"] == {"path": "/", "port": "http"}
    assert main["resources"]["requests"] == {"cpu": "250m", "memory": "256Mi"}
    assert main["resources"]["limits"] == {"cpu": "2", "memory": "512Mi"}
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/port"] == str(port)
    assert annotations["prometheus.io/path"] == "/metrics"


def test_mm2_values_render_two_pods_running_flow_a_to_b():
    objects = render_values("mm2")
    validate_all(objects)
    kinds = by_kind(objects)
    assert set(kinds) == {"ConfigMap", "Deployment", "Service", "PodDisruptionBudget"}
    deployment = kinds["Deployment"]
    assert deployment["spec"]["replicas"] == 2
    assert_runs_safely(deployment)
    main = container(deployment)
    assert main["command"] == ["mirrorline"]
    assert main["args"] == ["mm2", "/etc/mirrorline/mm2.properties", "--clusters", "B"]
    assert {"name": "config", "mountPath": "/etc/mirrorline", "readOnly": True} in main["volumeMounts"]
    # the ConfigMap is an mm2.properties that mirrorline's own parser reads as flow A->B
    props = parse_properties(kinds["ConfigMap"]["data"]["mm2.properties"])
    assert props["A->B.enabled"] == "true" and props["A->B.topics"] == ".*"
    assert props["listeners"] == "http://0.0.0.0:8083"
    assert props["A->B.tasks.max"] == "4"
    specs = {spec.worker_id: spec for spec in worker_specs(MirrorMakerConfig(props), ["B"])}
    assert list(specs) == ["A->B"]
    assert specs["A->B"].worker_config["bootstrap.servers"].startswith("kafka-b-0")
    assert [c["name"] for c in specs["A->B"].connector_configs] == [
        "MirrorSourceConnector", "MirrorCheckpointConnector", "MirrorHeartbeatConnector"]
    pdb = kinds["PodDisruptionBudget"]
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    service = kinds["Service"]
    assert service["spec"]["ports"] == [{"name": "http", "port": 8083, "targetPort": "http", "protocol": "TCP"}]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_distributed_values_render_three_workers_advertising_their_pod_ip():
    objects = render_values("distributed")
    validate_all(objects)
    kinds = by_kind(objects)
    assert set(kinds) == {"ConfigMap", "Deployment", "Service", "PodDisruptionBudget"}
    deployment = kinds["Deployment"]
    assert deployment["spec"]["replicas"] == 3
    assert_runs_safely(deployment)
    assert container(deployment)["args"] == ["distributed", "/etc/mirrorline/worker.properties"]
    worker = parse_properties(kinds["ConfigMap"]["data"]["worker.properties"])
    parsed = DISTRIBUTED_CONFIG_DEF.parse(worker)
    assert parsed["group.id"] == "mirrorline" and parsed["listeners"] == ["http://0.0.0.0:8083"]
    assert parsed["config.storage.topic"] == "mirrorline-configs"
    (init,) = deployment["spec"]["template"]["spec"]["initContainers"]
    assert init["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert "rest.advertised.host.name" in init["command"][-1]


def test_single_replica_has_no_pdb_and_service_monitor_is_optional():
    kinds = by_kind(render_values("mm2", "--set", "replicas=1"))
    assert "PodDisruptionBudget" not in kinds and kinds["Deployment"]["spec"]["replicas"] == 1
    objects = render_values("distributed", "--set", "metrics.serviceMonitor.enabled=true",
                            "--set", "metrics.podAnnotations=false")
    validate_all(objects)  # skips the ServiceMonitor: a CRD kind
    kinds = by_kind(objects)
    monitor = kinds["ServiceMonitor"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "30s"}]
    assert monitor["spec"]["selector"]["matchLabels"] == kinds["Service"]["spec"]["selector"]
    assert "prometheus.io/scrape" not in kinds["Deployment"]["spec"]["template"]["metadata"].get("annotations", {})


def test_standalone_renders_one_worker_with_its_connectors():
    objects = render_values("distributed", "--set", "mode=standalone,replicas=1",
                            "--set", "standalone.connectors.mirror.connector\\.class=MirrorSource",
                            "--set", "standalone.connectors.mirror.tasks\\.max=2000000")
    validate_all(objects)
    kinds = by_kind(objects)
    assert "PodDisruptionBudget" not in kinds
    assert container(kinds["Deployment"])["args"] == [
        "standalone", "/etc/mirrorline/worker.properties", "/etc/mirrorline/connector-mirror.properties"]
    connector = parse_properties(kinds["ConfigMap"]["data"]["connector-mirror.properties"])
    assert connector == {"name": "mirror", "connector.class": "MirrorSource", "tasks.max": "2000000"}


@pytest.mark.parametrize("values, message", [
    (["--set", "replicas=3,mode=standalone"], "replicas: 3 needs mode: distributed or mode: mm2"),
    (["--set", "mode=bogus"], "value must be one of 'mm2', 'distributed', 'standalone'"),
    (["--set-json", 'mm2.flows=[{"source":"A","target":"C"}]'], "flow A->C names a cluster not in mm2.clusters"),
    (["--set", "mode=distributed,worker.bootstrapServers="], "mode: distributed needs worker.bootstrapServers"),
])
def test_contradictory_values_fail_with_a_clear_message(values, message):
    base = "values-distributed.yaml" if "mode=distributed" in " ".join(values) else "values-mm2.yaml"
    result = helm("template", "mirrorline", str(CHART), "-f", str(CHART / base), *values, check=False)
    assert result.returncode != 0, result.stdout
    assert message in result.stderr, result.stderr


def test_helm_lint_passes_for_both_values_files():
    for name in ("mm2", "distributed"):
        result = helm("lint", "--strict", str(CHART), "-f", str(CHART / f"values-{name}.yaml"))
        assert "0 chart(s) failed" in result.stdout, result.stdout


def test_strict_validation_catches_an_unknown_field():
    """Guards the guard: the validator really rejects a Deployment with a misspelt field."""
    deployment = by_kind(render_values("mm2"))["Deployment"]
    container(deployment)["readinesProbe"] = {"httpGet": {"path": "/health", "port": "http"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBE_VERSIONS[0], strict=True)


def test_plain_manifests_are_what_the_chart_renders():
    result = subprocess.run([str(ROOT / "deploy" / "kubernetes" / "render"), "--check"], capture_output=True,
                            text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr


def test_spark_values_point_jobs_at_a_standalone_master():
    objects = render_values("distributed", "--set", "spark.master=spark://spark-master:7077",
                            "--set", "spark.conf.spark\\.executor\\.memory=2g", "--set", "spark.conf.cores\\.max=4")
    validate_all(objects)
    kinds = by_kind(objects)
    worker = parse_properties(kinds["ConfigMap"]["data"]["worker.properties"])
    assert worker["spark.master"] == "spark://spark-master:7077"
    assert worker["spark.executor.memory"] == "2g" and worker["spark.cores.max"] == "4"
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    env = {e["name"]: e for e in container(kinds["Deployment"])["env"]}
    assert env["SPARK_LOCAL_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert pod["automountServiceAccountToken"] is False and "ServiceAccount" not in kinds


def test_spark_on_kubernetes_gets_an_executor_image_and_a_service_account_that_may_make_pods():
    objects = render_values("distributed", "--set", "spark.master=k8s://https://kubernetes.default.svc",
                            "--set", "spark.kubernetes.image=registry.example/mirrorline-spark:0.1.0")
    validate_all(objects)
    kinds = by_kind(objects)
    worker = parse_properties(kinds["ConfigMap"]["data"]["worker.properties"])
    assert worker["spark.master"] == "k8s://https://kubernetes.default.svc"
    assert worker["spark.kubernetes.container.image"] == "registry.example/mirrorline-spark:0.1.0"
    assert worker["spark.submit.deployMode"] == "client" and worker["spark.kubernetes.namespace"] == "mirrorline"
    account = worker["spark.kubernetes.authenticate.driver.serviceAccountName"]
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account == kinds["ServiceAccount"]["metadata"]["name"]
    assert pod["automountServiceAccountToken"] is True
    assert {"pods", "services", "configmaps"} <= set(kinds["Role"]["rules"][0]["resources"])
    assert "create" in kinds["Role"]["rules"][0]["verbs"]
    assert kinds["RoleBinding"]["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": "mirrorline"}]
    result = helm("template", "mirrorline", str(CHART), "-f", str(CHART / "values-distributed.yaml"),
                  "--set", "spark.master=k8s://https://kubernetes.default.svc", check=False)
    assert result.returncode != 0 and "needs spark.kubernetes.image" in result.stderr, result.stderr
    result = helm("template", "mirrorline", str(CHART), "-f", str(CHART / "values-distributed.yaml"),
                  "--set", "spark.master=yarn", check=False)
    assert result.returncode != 0 and "/spark/master" in result.stderr, result.stderr
