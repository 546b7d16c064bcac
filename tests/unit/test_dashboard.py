"""The Grafana dashboard and the Prometheus alert rules under deploy/ are well-formed and name
only metrics, and labels, that mirrorline declares.

``tests/integration/test_dashboard_metrics.py`` checks the same names against a live worker's
``/metrics``; it loads this module for the helpers below.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "mirrorline.json"
ALERTS = ROOT / "deploy" / "prometheus" / "mirrorline-alerts.yaml"

#: Series Prometheus makes itself for every scrape target; no worker exports them.
PROMETHEUS_SERIES = {"up"}
#: Labels Prometheus adds to every scraped series.
TARGET_LABELS = {"job", "instance"}

_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
             "group_right", "atan2", "inf", "nan"}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_SELECTOR = re.compile(r"([a-zA-Z_:][\w:]*)?\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_][\w]*)\s*(?:=~|!~|!=|=)")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\b\s*(?:\(([^)]*)\))?")
_IDENTIFIER = re.compile(r"(?<![\w.:$])([a-zA-Z_:][\w:]*)")
_LABEL_VALUES = re.compile(r"^\s*label_values\((.*),\s*([a-zA-Z_]\w*)\s*\)\s*$", re.S)


def load_dashboard() -> dict:
    """The dashboard's JSON model."""
    return json.loads(DASHBOARD.read_text())


def load_alert_rules() -> dict:
    """The alert rules file, parsed."""
    return yaml.safe_load(ALERTS.read_text())


def all_panels(dashboard: dict) -> Iterator[dict]:
    """Every panel, including those inside collapsed rows."""
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def dashboard_exprs(dashboard: dict) -> list[tuple[str, str]]:
    """``(where, PromQL)`` for every panel query and every query variable's metric selector."""
    exprs = [(f"panel {p['id']} {p['title']!r} {t['refId']}", t["expr"])
             for p in all_panels(dashboard) for t in p.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
            match = _LABEL_VALUES.match(query)
            assert match, f"variable {variable['name']}: expected label_values(selector, label), got {query!r}"
            exprs.append((f"variable {variable['name']}", match.group(1)))
    return exprs


def alert_exprs(rules: dict) -> list[tuple[str, str]]:
    """``(alert name, PromQL)`` for every rule."""
    return [(rule.get("alert") or rule.get("record"), rule["expr"])
            for group in rules["groups"] for rule in group["rules"]]


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (not functions, keywords, labels or variables)."""
    text = _STRING.sub('""', expr)
    text = _SELECTOR.sub(lambda m: f" {m.group(1) or ''} ", text)
    text = _RANGE.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        name = match.group(1)
        if name.lower() in _KEYWORDS or text[match.end():].lstrip().startswith("("):
            continue  # a keyword, or a function / aggregation call
        names.add(name)
    return names


def label_uses(expr: str) -> tuple[list[tuple[str, str]], set[str]]:
    """``([(metric, label)] from selectors, {labels of by/without/on/ignoring/group_* clauses})``."""
    text = _STRING.sub('""', expr)
    selected = [(m.group(1) or "", label) for m in _SELECTOR.finditer(text)
                for label in _MATCHER.findall(m.group(2))]
    grouped = {label.strip() for m in _GROUPING.finditer(text) if m.group(2)
               for label in m.group(2).split(",") if label.strip()}
    return selected, grouped


def exported_names(metrics_text: str) -> tuple[set[str], set[str]]:
    """``(declared, sampled)`` metric names in Prometheus text: declared from ``# HELP``/``# TYPE``
    lines (prometheus_client prints them for a labelled metric before any series exists),
    sampled from the series lines."""
    declared, sampled = set(), set()
    for line in metrics_text.splitlines():
        if line.startswith(("# HELP ", "# TYPE ")):
            declared.add(line.split()[2])
        elif line and not line.startswith("#"):
            sampled.add(re.split(r"[{\s]", line, maxsplit=1)[0])
    return declared, sampled


def declared_metrics() -> dict[str, set[str]]:
    """Every metric mirrorline's modules declare, as exported (counters with ``_total``) -> its labels."""
    from prometheus_client.metrics import MetricWrapperBase

    from mirrorline.connectors.checkpoint import metrics as checkpoint_metrics
    from mirrorline.connectors.source_mirror import metrics as source_metrics
    from mirrorline.connectors.source_mirror import spark_jobs as source_job_metrics
    from mirrorline.runtime import metrics as runtime_metrics
    from mirrorline.runtime.distributed import metrics as worker_metrics

    declared = {}
    for module in (runtime_metrics, worker_metrics, source_metrics, source_job_metrics, checkpoint_metrics):
        for metric in vars(module).values():
            if isinstance(metric, MetricWrapperBase):
                for family in metric.describe():
                    name = family.name + ("_total" if family.type == "counter" else "")
                    declared[name] = set(metric._labelnames)  # no public accessor for a metric's label names
    return declared


def all_exprs() -> list[tuple[str, str]]:
    """Every PromQL expression under deploy/: the dashboard's, then the alert rules'."""
    return dashboard_exprs(load_dashboard()) + alert_exprs(load_alert_rules())


# -- the extractor itself ----------------------------------------------------------------------

@pytest.mark.parametrize("expr, names", [
    ('sum by (source, target) (rate(mirror_record_count_total{source=~"$source",topic=~"a.b"}[$__rate_interval]))',
     {"mirror_record_count_total"}),
    ("histogram_quantile(0.99, sum without (le) (rate(x_bucket[5m])))", {"x_bucket"}),
    ("a / on (job) group_left (instance) b offset 1h30m > bool 0", {"a", "b"}),
    ('max_over_time(foo[1h:5m]) and ignoring(x) bar{l="by (y)"} unless count(baz) by (z)', {"foo", "bar", "baz"}),
    ('up{job="mirrorline"} == 0', {"up"}),
    ('{__name__="raw"} * 1e3', set()),
])
def test_metric_names_extracts_only_metrics(expr, names):
    assert metric_names(expr) == names


def test_label_uses_finds_matchers_and_grouping_labels():
    selected, grouped = label_uses('sum by (source, topic) (m{group=~"$g", x!="{y}"}) and on (job) n')
    assert selected == [("m", "group"), ("m", "x")]
    assert grouped == {"source", "topic", "job"}


def test_exported_names_reads_declarations_and_samples():
    text = ("# HELP a_total h\n# TYPE a_total counter\n# HELP b h\n# TYPE b gauge\n"
            'c{x="1"} 2.0\nd 1.0\n')
    assert exported_names(text) == ({"a_total", "b"}, {"c", "d"})


# -- the dashboard -----------------------------------------------------------------------------

def test_dashboard_is_a_well_formed_grafana_model():
    dashboard = load_dashboard()
    assert dashboard["uid"] and dashboard["title"] and 36 <= dashboard["schemaVersion"] <= 41
    panels = list(all_panels(dashboard))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert {"source", "target", "topic"} <= set(variables)
    for panel in panels:
        where = f"panel {panel.get('id')} {panel.get('title')!r}"
        grid = panel.get("gridPos", {})
        assert {"h", "w", "x", "y"} <= set(grid) and grid["x"] + grid["w"] <= 24, where
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, where
        assert panel.get("title") and panel.get("description"), where
        assert panel["targets"], where
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), where
        for query in panel["targets"]:
            assert query.get("expr", "").strip(), where
            assert query.get("datasource", panel["datasource"]) == panel["datasource"], where
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, variable["name"]


def test_dashboard_panels_do_not_overlap():
    cells: dict[tuple[int, int], str] = {}
    for panel in all_panels(load_dashboard()):
        grid = panel["gridPos"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = panel["title"]


def test_dashboard_uses_only_defined_variables():
    dashboard = load_dashboard()
    defined = {v["name"] for v in dashboard["templating"]["list"]}
    builtin = {"__rate_interval", "__interval", "__range", "__range_s"}
    for where, expr in dashboard_exprs(dashboard):
        for name in re.findall(r"\$\{?(\w+)", expr):
            assert name in defined | builtin, f"{where}: ${name} is not a dashboard variable"


# -- the alert rules ---------------------------------------------------------------------------

def test_alert_rules_are_well_formed():
    rules = load_alert_rules()
    names = []
    assert rules["groups"]
    for group in rules["groups"]:
        assert group["name"] and group["rules"], group
        for rule in group["rules"]:
            names.append(rule["alert"])
            assert re.fullmatch(r"Mirrorline[A-Za-z]+", rule["alert"]), rule["alert"]
            assert isinstance(rule["expr"], str) and rule["expr"].strip(), rule["alert"]
            assert re.fullmatch(r"\d+[smh]", str(rule["for"])), rule["alert"]
            assert rule["labels"]["severity"] in {"critical", "warning", "info"}, rule["alert"]
            assert rule["annotations"]["summary"].strip() and rule["annotations"]["description"].strip(), rule["alert"]
            assert set(rule) <= {"alert", "expr", "for", "labels", "annotations", "keep_firing_for"}, rule["alert"]
    assert len(names) == len(set(names)), "alert names must be unique"
    # what the operations guide promises to alert on
    for alert in ("MirrorlineTaskFailed", "MirrorlineTaskRestartingRepeatedly", "MirrorlineTaskStalled",
                  "MirrorlineReplicationLagHigh", "MirrorlineReplicationLatencyHigh", "MirrorlineCheckpointsStale",
                  "MirrorlineRecordsLostToRetention", "MirrorlineWorkerIdle", "MirrorlineNoConnectors",
                  "MirrorlineScrapeTargetDown"):
        assert alert in names


def test_operations_guide_explains_every_alert():
    guide = (ROOT / "docs" / "operations.md").read_text()
    for name, _ in alert_exprs(load_alert_rules()):
        assert f"`{name}`" in guide, f"docs/operations.md does not explain {name}"


# -- names and labels against the declarations -------------------------------------------------

def test_every_query_names_a_declared_metric_with_its_labels():
    declared = declared_metrics()
    from prometheus_client import REGISTRY, generate_latest

    # the default collectors (process_*, python_*) as the worker's /metrics serves them
    process_metrics = {name: set() for name in exported_names(generate_latest(REGISTRY).decode())[0]
                       if name.startswith("process_")}
    known = {**process_metrics, **{name: {"job", "instance"} for name in PROMETHEUS_SERIES}, **declared}
    problems = []
    for where, expr in all_exprs():
        names = metric_names(expr)
        if not names:
            problems.append(f"{where}: no metric found in {expr!r}")
        for name in names - set(known):
            problems.append(f"{where}: {name} is not a metric mirrorline declares")
        selected, grouped = label_uses(expr)
        for metric, label in selected:
            if metric in known and label not in known[metric] | TARGET_LABELS:
                problems.append(f"{where}: {metric} has no label {label!r}")
        available = set().union(*(known.get(n, set()) for n in names)) | TARGET_LABELS
        for label in grouped - available:
            problems.append(f"{where}: grouping label {label!r} is on none of {sorted(names)}")
    assert not problems, "\n".join(problems)


def test_dashboard_shows_every_mirrorline_metric():
    used = set().union(*(metric_names(expr) for _, expr in dashboard_exprs(load_dashboard())))
    missing = set(declared_metrics()) - used
    assert not missing, f"metrics with no dashboard panel: {sorted(missing)}"
