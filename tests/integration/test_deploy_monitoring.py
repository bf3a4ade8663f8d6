"""What gpubot ships for Prometheus and Alertmanager users (deploy/), checked with the real
promtool and amtool and against gpubot itself.

- The alert rules pass `promtool check rules`, and their unit tests (`promtool test rules`)
  pass, cover every alert both firing and not firing, and fail when a rule is broken.
- The PrometheusRule carries exactly the plain file's groups.
- The Alertmanager config and its route snippet pass `amtool check-config`, and route the
  alerts where the comments say.
- The dcgm-exporter CSV enables every DCGM field the rules use; the simulator serves them.
- The alert names are the ones gpubot's rules read, and every alert the promtool tests expect,
  delivered to gpubot as a webhook, names its node and leads to the intended diagnosis.

promtool and amtool come from Debian's prometheus and prometheus-alertmanager packages
(.ci/run installs them): a missing binary fails these tests, it does not skip them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.config import ServeSettings, Settings
from bot.facts.snapshots import parse_snapshot
from bot.roots.offline import diagnose_snapshot, load_ruleset
from bot.sources.alertmanager.payloads import (
    ALERT_BYTES,
    ENVELOPE_BYTES,
    alerts_that_fit,
    signals_from_payload,
    validate_payload,
)
from gpusim.exporter import DcgmCollector, render
from gpusim.metrics import FIELDS
from gpusim.scenarios import FIXTURE_NOW, healthy_cluster
from gpusim.state import ClusterState
from tests.helpers.paths import REPO

DEPLOY = REPO / "deploy"
ALERTS = DEPLOY / "prometheus" / "gpu-alerts.yaml"
ALERT_TESTS = DEPLOY / "prometheus" / "gpu-alerts.test.yaml"
PROMETHEUS_RULE = DEPLOY / "prometheus" / "prometheusrule.yaml"
RECEIVER = DEPLOY / "alertmanager" / "receiver.yaml"
COUNTERS = DEPLOY / "dcgm-exporter" / "dcp-metrics-gpubot.csv"
RULES = REPO / "rules"
HEALTHY_SNAPSHOT = RULES / "tests" / "snapshots" / "healthy.json"

DCGM_NAME = re.compile(r"\bDCGM_(?:FI|EXP)_[A-Z0-9_]+\b")
# How rules/*.yaml name alerts in CEL: `a.name == "X"` and `a.name in ["X", "Y"]`.
CEL_NAME_EQ = re.compile(r'\b\w+\.name\s*==\s*"([^"]+)"')
CEL_NAME_IN = re.compile(r"\b\w+\.name\s+in\s*\[([^\]]*)\]")
XID_ALERT = "GPUXidError"
"""Not named in any rule: the evidence turns it into `xids` (its `xid` label), which the Xid
rules read. test_every_expected_alert_reaches_the_intended_diagnosis proves that path."""

NOT_IN_SIMULATOR: dict[str, str] = {}
"""DCGM names the rules use that gpusim/metrics.py does not serve yet. The test fails when
the simulator gains one, so this list cannot go stale."""


# ---- helpers --------------------------------------------------------------------------------


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"{name} not found on PATH: install Debian's prometheus and prometheus-alertmanager "
            "packages (.ci/run does)"
        )
    return path


def run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


@cache
def alert_file() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(ALERTS.read_text())
    return data


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in alert_file()["groups"] for rule in group["rules"]]


def alert_names() -> set[str]:
    return {rule["alert"] for rule in alert_rules()}


@cache
def alert_tests() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(ALERT_TESTS.read_text())
    return data


def expected_alerts() -> Iterator[dict[str, str]]:
    """Every alert the promtool tests expect to fire, as its full label set, once each."""
    seen = set()
    for case in alert_tests()["tests"]:
        for check in case["alert_rule_test"]:
            for alert in check.get("exp_alerts") or []:
                labels = {"alertname": check["alertname"]}
                labels.update({k: str(v) for k, v in alert["exp_labels"].items()})
                key = tuple(sorted(labels.items()))
                if key not in seen:
                    seen.add(key)
                    yield labels


def counters_csv() -> dict[str, str]:
    """DCGM name -> Prometheus type of every active line."""
    fields: dict[str, str] = {}
    for number, line in enumerate(COUNTERS.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [p.strip() for p in line.split(",", 2)]
        assert len(parts) == 3 and all(parts), f"{COUNTERS.name}:{number}: {line!r}"
        name, kind, _help = parts
        assert re.fullmatch(r"DCGM_(FI|EXP)_[A-Z0-9_]+", name), f"{COUNTERS.name}:{number}"
        assert kind in {"gauge", "counter", "label"}, f"{COUNTERS.name}:{number}: type {kind}"
        assert name not in fields, f"{COUNTERS.name}:{number}: {name} twice"
        fields[name] = kind
    return fields


def dcgm_names_in_rules() -> set[str]:
    return {name for rule in alert_rules() for name in DCGM_NAME.findall(rule["expr"])}


@cache
def simulator_text() -> str:
    """What the simulated dcgm-exporter serves for a healthy two-node cluster."""
    store = ClusterState()
    store.load(healthy_cluster(2, FIXTURE_NOW)["items"])
    return render(DcgmCollector(store)).decode()


def snippet_route() -> dict[str, Any]:
    """The commented route snippet at the end of receiver.yaml, uncommented."""
    text = RECEIVER.read_text()
    begin = text.index("# BEGIN gpubot route snippet\n")
    end = text.index("# END gpubot route snippet")
    lines = text[begin:end].splitlines()[1:]
    assert all(line.startswith("#") for line in lines)
    snippet: dict[str, Any] = yaml.safe_load("\n".join(line[2:] for line in lines))
    (route,) = snippet["route"]["routes"]
    assert isinstance(route, dict)
    return route


# ---- Prometheus rules -----------------------------------------------------------------------


def test_promtool_check_rules_finds_every_rule() -> None:
    result = run(tool("promtool"), "check", "rules", ALERTS)
    assert result.returncode == 0, result.stdout + result.stderr
    found = re.search(r"SUCCESS: (\d+) rules found", result.stdout)
    assert found, result.stdout
    assert int(found.group(1)) == len(alert_rules()) == 8


def test_promtool_unit_tests_pass() -> None:
    result = run(tool("promtool"), "test", "rules", ALERT_TESTS.name, cwd=ALERT_TESTS.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout and "FAILED" not in result.stdout


@pytest.mark.parametrize(
    ("alert", "old", "new"),
    [
        ("GPUTemperatureHigh", ") > 85\n", ") > 95\n"),
        ("GPUXidError", '"xid", DCGM_FI_DEV_XID_ERRORS > 0', '"xid", DCGM_FI_DEV_XID_ERRORS > 80'),
        ("GPUCapacityZero", "kube_node_created) > 600", "kube_node_created) > 0"),
        ("GPUFabricManagerDown", "        for: 3m\n", "        for: 1m\n"),
    ],
)
def test_promtool_unit_tests_catch_a_broken_rule(
    tmp_path: Path, alert: str, old: str, new: str
) -> None:
    text = ALERTS.read_text()
    assert text.count(old) == 1
    (tmp_path / ALERTS.name).write_text(text.replace(old, new))
    shutil.copy(ALERT_TESTS, tmp_path / ALERT_TESTS.name)
    result = run(tool("promtool"), "test", "rules", ALERT_TESTS.name, cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "FAILED" in output
    assert f"alertname: {alert}," in output


def test_unit_tests_cover_every_alert_firing_and_not_firing() -> None:
    fires: set[str] = set()
    silent: set[str] = set()
    for case in alert_tests()["tests"]:
        for check in case["alert_rule_test"]:
            (fires if check.get("exp_alerts") else silent).add(check["alertname"])
    assert fires == alert_names()
    assert silent == alert_names()


def test_every_alert_has_node_severity_and_annotations() -> None:
    for rule in alert_rules():
        labels, annotations = rule.get("labels", {}), rule.get("annotations", {})
        assert "severity" in labels, rule["alert"]
        assert set(annotations) >= {"summary", "description", "runbook_url"}, rule["alert"]
        assert annotations["runbook_url"].startswith("https://"), rule["alert"]
    for labels in expected_alerts():
        assert labels["severity"] in {"critical", "warning"}, labels
        assert labels.get("node") or labels.get("instance"), labels
        if labels["alertname"] not in {
            "GPUFabricManagerDown",
            "DCGMExporterDown",
            "GPUCapacityZero",
        }:
            assert labels.get("gpu") and labels.get("UUID"), labels
        assert labels["alertname"] != XID_ALERT or labels["xid"].isdigit(), labels


def test_prometheusrule_carries_exactly_the_plain_groups() -> None:
    resource = yaml.safe_load(PROMETHEUS_RULE.read_text())
    assert resource["apiVersion"] == "monitoring.coreos.com/v1"
    assert resource["kind"] == "PrometheusRule"
    assert resource["metadata"]["name"]
    assert resource["spec"] == {"groups": alert_file()["groups"]}
    assert set(alert_file()) == {"groups"}


# ---- Alertmanager ---------------------------------------------------------------------------


def amtool_check(path: Path) -> subprocess.CompletedProcess[str]:
    return run(tool("amtool"), "check-config", path)


def routes_to(config: Path, *labels: str) -> str:
    result = run(tool("amtool"), "config", "routes", "test", f"--config.file={config}", *labels)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip()


def test_amtool_accepts_the_receiver_config() -> None:
    result = amtool_check(RECEIVER)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
    assert " - 1 receivers" in result.stdout
    assert routes_to(RECEIVER, "alertname=GPUXidError", "node=gpu-a1") == "gpubot"


def test_amtool_rejects_a_broken_receiver_config(tmp_path: Path) -> None:
    config = yaml.safe_load(RECEIVER.read_text())
    auth = config["receivers"][0]["webhook_configs"][0]["http_config"]["authorization"]
    auth["credentials"] = "inline-and-from-a-file"
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(config))
    result = amtool_check(broken)
    assert result.returncode != 0
    assert "credentials" in result.stdout + result.stderr


def test_receiver_sends_gpubot_everything_it_needs() -> None:
    config = yaml.safe_load(RECEIVER.read_text())
    route = config["route"]
    assert route["receiver"] == "gpubot"
    assert route["group_by"] == ["alertname", "node"]
    (receiver,) = config["receivers"]
    (webhook,) = receiver["webhook_configs"]
    assert webhook["url"] == "http://gpubot:8080/alertmanager"
    assert webhook["send_resolved"] is True
    # A notification's body within gpubot's default limit: a larger one is a 413, and
    # Alertmanager does not retry a 4xx (issue 31, item 6; it was 0, no limit).
    assert 0 < webhook["max_alerts"] <= alerts_that_fit(ServeSettings().max_body_bytes)
    assert webhook["http_config"]["authorization"] == {
        "type": "Bearer",
        "credentials_file": "/etc/alertmanager/secrets/gpubot-webhook/token",
    }
    snippet = snippet_route()
    assert snippet["receiver"] == "gpubot"
    assert snippet["continue"] is True
    for key in ("group_by", "group_wait", "group_interval", "repeat_interval"):
        assert snippet[key] == route[key], key


def _as_alertmanager_writes(value: Any) -> int:
    """Bytes of `value` as Alertmanager's Go encoder writes it: compact, non-ASCII as it is,
    `&`, `<` and `>` escaped (the captures re-encoded this way are byte for byte the same)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e")):
        text = text.replace(char, escaped)
    return len(text.encode())


def test_the_receiver_is_sized_by_real_notifications() -> None:
    """`max_alerts` is sized at ALERT_BYTES an alert and ENVELOPE_BYTES for the rest: more
    than twice every alert, and more than the rest of every notification, that the real
    Alertmanager sent in tests/data/alertmanager/community."""
    captures = sorted((REPO / "tests" / "data" / "alertmanager" / "community").glob("*.json"))
    assert captures
    for capture in captures:
        raw = capture.read_bytes()
        body = json.loads(raw)
        assert _as_alertmanager_writes(body) == len(raw.rstrip(b"\n")), capture.name
        largest = max(_as_alertmanager_writes(alert) for alert in body["alerts"])
        assert 2 * largest <= ALERT_BYTES, (capture.name, largest)
        assert _as_alertmanager_writes({**body, "alerts": []}) <= ENVELOPE_BYTES, capture.name


def test_route_snippet_matches_exactly_the_shipped_alerts() -> None:
    (matcher,) = snippet_route()["matchers"]
    found = re.fullmatch(r'alertname =~ "([A-Za-z|]+)"', matcher)
    assert found, matcher
    assert set(found.group(1).split("|")) == alert_names()


def test_route_snippet_merged_into_an_existing_config(tmp_path: Path) -> None:
    """The snippet first, a team's pager route, then the catch-all the comment asks for."""
    gpubot = yaml.safe_load(RECEIVER.read_text())["receivers"][0]
    merged = {
        "route": {
            "receiver": "oncall",
            "group_by": ["alertname"],
            "routes": [
                snippet_route(),
                {"receiver": "pager", "matchers": ['severity="critical"']},
                {"receiver": "oncall"},
            ],
        },
        "receivers": [{"name": "oncall"}, {"name": "pager"}, gpubot],
    }
    config = tmp_path / "alertmanager.yaml"
    config.write_text(yaml.safe_dump(merged))
    result = amtool_check(config)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " - 3 receivers" in result.stdout
    for rule in alert_rules():
        severity = rule["labels"]["severity"]
        severity = "critical" if "{{" in severity else severity  # GPUXidError: per Xid
        got = routes_to(config, f"alertname={rule['alert']}", f"severity={severity}", "node=n1")
        assert got == ("gpubot,pager" if severity == "critical" else "gpubot,oncall"), rule
    assert routes_to(config, "alertname=KubeNodeNotReady", "severity=warning") == "oncall"
    assert routes_to(config, "alertname=KubeletDown", "severity=critical") == "pager"


# ---- dcgm-exporter counters and the simulator -----------------------------------------------


def test_counters_csv_enables_every_dcgm_field_the_rules_use() -> None:
    used = dcgm_names_in_rules()
    assert len(used) >= 10, used  # the extraction finds the names at all
    assert used <= set(counters_csv())


def test_counters_csv_has_every_field_the_simulator_serves_with_its_type() -> None:
    csv = counters_csv()
    for field in FIELDS:
        assert csv.get(field.name) == field.type, field.name
    assert csv["DCGM_FI_DRIVER_VERSION"] == "label"


def test_simulator_serves_every_dcgm_field_the_rules_use() -> None:
    served = dict(re.findall(r"^# TYPE (\S+) (\S+)$", simulator_text(), re.MULTILINE))
    csv = counters_csv()
    for name, kind in served.items():
        assert csv.get(name) == kind, name
    missing = dcgm_names_in_rules() - set(served)
    assert missing == set(NOT_IN_SIMULATOR), (
        "the simulator serves a field listed in NOT_IN_SIMULATOR (remove it there), "
        f"or the rules use one it does not serve: {sorted(missing)}"
    )


def test_simulator_series_carry_the_labels_the_dcgm_alerts_read() -> None:
    sample = re.search(r"^DCGM_FI_DEV_XID_ERRORS\{(.*)\} ", simulator_text(), re.MULTILINE)
    assert sample, "no DCGM_FI_DEV_XID_ERRORS sample"
    served = set(re.findall(r'(\w+)="', sample.group(1)))
    optional = {"node", "kubernetes_node", "xid"}  # relabelings; the rule's own
    for rule in alert_rules():
        if not DCGM_NAME.search(rule["expr"]):
            continue
        templates = " ".join([*rule["labels"].values(), *rule["annotations"].values()])
        read = set(re.findall(r"\$labels\.(\w+)", templates))
        assert read - optional <= served, (rule["alert"], read - optional - served)


# ---- the alert names and gpubot -------------------------------------------------------------


def alert_names_in_gpubot_rules() -> set[str]:
    names: set[str] = set()
    for path in sorted(RULES.glob("*.yaml")):
        text = path.read_text()
        names.update(CEL_NAME_EQ.findall(text))
        for listed in CEL_NAME_IN.findall(text):
            names.update(re.findall(r'"([^"]+)"', listed))
    return names


def test_alert_names_are_the_ones_gpubot_rules_read() -> None:
    read = alert_names_in_gpubot_rules()
    assert "GPUECCDoubleBitError" in read  # the extraction works at all
    assert read == alert_names() - {XID_ALERT}
    assert XID_ALERT in alert_names()


# The rule each shipped alert leads to on the healthy snapshot (nodes gpu-a1..gpu-a4).
INTENDED = {
    "GPUECCDoubleBitError": "gpu-ecc-error",
    "GPURowRemapFailure": "gpu-ecc-error",
    "GPUNVLinkErrors": "nvlink-error",
    "GPUTemperatureHigh": "gpu-thermal-power",
    "GPUFabricManagerDown": "fabric-manager-down",
    "DCGMExporterDown": "gpu-operator-component-failing",
    "GPUCapacityZero": "gpu-capacity-zero",
}
NOT_IN_SNAPSHOT = "gpu-z9"


@pytest.fixture(scope="module")
def gpubot() -> tuple[Settings, Any, Any]:
    settings = Settings()
    rules = load_ruleset(settings, [RULES])
    snapshot = parse_snapshot(json.loads(HEALTHY_SNAPSHOT.read_text()))
    return settings, rules, snapshot


def test_every_expected_alert_reaches_the_intended_diagnosis(
    gpubot: tuple[Settings, Any, Any],
) -> None:
    settings, rules, snapshot = gpubot
    known = {node["metadata"]["name"] for node in snapshot.nodes}
    checked: set[str] = set()
    for labels in expected_alerts():
        name = labels["alertname"]
        if name == "GPUCapacityZero":
            # gpubot trusts its fresher facts for a node it knows (gpu-a1 is healthy there):
            # the alert speaks for a node the snapshot lacks.
            labels = {**labels, "node": NOT_IN_SNAPSHOT}
        payload = validate_payload(
            {"status": "firing", "alerts": [{"status": "firing", "labels": labels}]}
        )
        (signal,) = signals_from_payload(payload, settings.node_labels)
        assert signal.name == name
        assert signal.gpu == labels.get("gpu")
        expected_node = labels.get("node") or labels["instance"].rsplit(":", 1)[0]
        assert signal.node == expected_node, labels
        if signal.node not in known and name != "GPUCapacityZero":
            continue
        if name == XID_ALERT:
            rule = "gpu-fell-off-bus" if labels["xid"] == "79" else "gpu-xid-error"
        else:
            rule = INTENDED[name]
        result = diagnose_snapshot(snapshot, [signal], rules, settings, datetime.now(UTC))
        assert not result.errors
        fired = {(d.rule, d.node) for d in result.diagnoses}
        assert (rule, signal.node) in fired, (labels, fired)
        checked.add(name)
    assert checked == alert_names()
