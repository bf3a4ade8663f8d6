"""The RBAC proof of the Helm chart: `gpubot serve --in-cluster` as a pod would run it (its
ServiceAccount's projected token and CA, KUBERNETES_SERVICE_HOST/PORT) against the simulated
cluster's HTTPS API, whose RBAC is the chart's, rendered by Helm and loaded as `kubectl apply`
would create it. The settings are the ones the chart writes into its ConfigMap (the Lease's
and the smoke-test pods' namespace, the smoke test on), with only the time scale, the
approvers and Prometheus' address set for the test.

- Sufficient: the whole loop runs as the chart's ServiceAccount, with the real Prometheus
  scraping the simulator's dcgm-exporter for the health gate: alert → diagnosis → approval
  → cordon → drain → repair → the GPU smoke-test pod → health gate → approval → uncordon →
  resolved, on the leader Lease, and the simulator's audit log holds no 401 and no 403.
- Minimal: for every verb of every rule of the rendered ClusterRole and Role, the loop used
  it (the audit log names the step that did), and a run without it stops at its first step,
  the start-up permission check, with one line naming exactly that permission.

One loop serves the module (about 40 s); the runs without a permission share one simulator.
"""

from __future__ import annotations

import copy
import functools
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.model import Action, IncidentState
from bot.names import MAINTENANCE_TAINT
from bot.store.sql import SqlStore
from gpusim import faults
from gpusim.apiserver import SimulatedApiServer, running
from gpusim.auditing import AuditEvent
from gpusim.launching import Simulation, load_manifests, start_simulator
from gpusim.resources import BY_KIND
from tests.helpers.kubectl import kubectl_as, needs_kubectl
from tests.helpers.paths import REPO
from tests.helpers.processes import (
    NODE,
    _env,
    evictable_pods,
    finished,
    in_cluster,
    post_alert,
    running_gpubot,
    the_request,
    wait_for,
)
from tests.helpers.servers import prometheus_server, requires_prometheus

helm = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")

NAMESPACE = "gpubot"
RELEASE = "gpubot"
"""The chart's release: its fullname is `gpubot`, so the leader Lease is gpubot/gpubot-leader."""
SA_USER = f"system:serviceaccount:{NAMESPACE}:{RELEASE}"
RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
ALICE = {"users": ["alice"], "two_person": False}
TEST_TIME: dict[str, Any] = {
    "remediation": {
        "approvals": {"cordon": ALICE, "drain": ALICE, "uncordon": ALICE},
        "drain_timeout_s": 60,
        "smoke_test": {"timeout_s": 30},
    },
    "thresholds": {"settle_s": 3, "resolve_after_s": 4},
    "schedule": {
        "leader_duties_s": 0.5,
        "follow_up_s": 1.0,
        "expiry_s": 5.0,
        "drain_watchdog_s": 5.0,
    },
    "serve": {
        "host": "127.0.0.1",
        "lease_duration_s": 3,
        "renew_deadline_s": 2,
        "retry_period_s": 0.5,
    },
}
"""What the test changes in the chart's settings: seconds instead of minutes, alice as the
approver, loopback. Namespaces, the Lease's name and the smoke test stay the chart's."""
RESOLVED = IncidentState.RESOLVED
EVIDENCE_WINDOW_S = 8
"""prometheus.window_s: the gate's "no new Xid" holds once the repaired GPU is quiet this long."""


@functools.cache
def rendered() -> tuple[str, ...]:
    """The chart with its default values, rendered by Helm: one YAML document per object."""
    with helm.Chart.load(str(REPO / "helm" / "gpubot")) as chart:
        files: dict[str, str] = chart.render({}, name=RELEASE, namespace=NAMESPACE, is_install=True)
    return tuple(
        yaml.safe_dump(doc)
        for path, text in sorted(files.items())
        if path.endswith((".yaml", ".yml"))
        for doc in yaml.safe_load_all(text)
        if doc
    )


def chart_rbac() -> list[dict[str, Any]]:
    """The chart's ServiceAccount, ClusterRole, Role and bindings (fresh copies), and the
    release namespace (`helm install --create-namespace`)."""
    docs = [yaml.safe_load(d) for d in rendered()]
    rbac = [d for d in docs if d["kind"] in RBAC_KINDS]
    assert {d["kind"] for d in rbac} == RBAC_KINDS
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    return [namespace, *rbac]


def chart_settings() -> dict[str, Any]:
    """settings.yaml of the chart's ConfigMap."""
    docs = [yaml.safe_load(d) for d in rendered()]
    [configmap] = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == RELEASE]
    settings: dict[str, Any] = yaml.safe_load(configmap["data"]["settings.yaml"])
    return settings


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def write_settings(path: Path, prometheus_url: str | None = None) -> Path:
    settings = merge(chart_settings(), TEST_TIME)
    del settings["store_url"]  # the chart's is a path in the pod's volume; --store-url here
    if prometheus_url:
        settings = merge(
            settings,
            {
                "prometheus": {
                    "url": prometheus_url,
                    "node_label": "Hostname",
                    "window_s": EVIDENCE_WINDOW_S,
                }
            },
        )
    path.write_text(yaml.safe_dump(settings))
    return path


def grants() -> list[tuple[str, int, str]]:
    """(kind, rule index, verb) for every verb the chart's ClusterRole and Role grant."""
    return [
        (doc["kind"], index, verb)
        for doc in chart_rbac()
        if doc["kind"] in ("ClusterRole", "Role")
        for index, rule in enumerate(doc["rules"])
        for verb in rule["verbs"]
    ]


def grant_id(grant: tuple[str, int, str]) -> str:
    kind, index, verb = grant
    [doc] = [d for d in chart_rbac() if d["kind"] == kind]
    return f"{kind}-{verb}-{'+'.join(doc['rules'][index]['resources'])}"


def named(rule: dict[str, Any], verb: str) -> str:
    """The permission as `kubectl auth can-i` takes it (bot.kube.permissions.Permission)."""
    group, resource = rule["apiGroups"][0], rule["resources"][0]
    base, _, sub = resource.partition("/")
    text = f"{base}.{group}" if group else base
    if sub:
        return f"{verb} {text}/{sub}"
    if rule.get("resourceNames"):
        return f"{verb} {text}/{rule['resourceNames'][0]}"
    return f"{verb} {text}"


def uses(event: AuditEvent, kind: str, rule: dict[str, Any], verb: str) -> bool:
    """Whether `rule` (of the ClusterRole or the Role in NAMESPACE) authorizes `event`."""
    resource = event.resource + (f"/{event.subresource}" if event.subresource else "")
    return (
        event.verb == verb
        and event.group in rule["apiGroups"]
        and resource in rule["resources"]
        and (not rule.get("resourceNames") or event.name in rule["resourceNames"])
        and (kind == "ClusterRole" or event.namespace == NAMESPACE)
    )


# ---- sufficient: the whole loop --------------------------------------------------------------


@dataclass
class Loop:
    """What the whole loop left: the audit log cut into its steps, and what it did."""

    steps: list[tuple[str, int]] = field(default_factory=list)
    """(step, index of its first request in the audit log)."""
    audit: list[AuditEvent] = field(default_factory=list)
    evicted: set[tuple[str, str]] = field(default_factory=set)
    must_leave: set[tuple[str, str]] = field(default_factory=set)
    direct_deletes: list[tuple[str, str]] = field(default_factory=list)
    node: dict[str, Any] = field(default_factory=dict)
    lease_holder: str = ""
    outcomes: dict[str, str] = field(default_factory=dict)
    overrode_gate: bool | None = None
    timeline: list[dict[str, Any]] = field(default_factory=list)

    def step_of(self, index: int) -> str:
        return [name for name, start in self.steps if start <= index][-1]


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loop]:
    tmp_path = tmp_path_factory.mktemp("rbac-loop")
    sim = start_simulator(4, manifests=yaml.safe_dump_all(chart_rbac()))
    try:
        yield run_the_loop(sim, tmp_path)
    finally:
        sim.stop()


def _dcgm_scrape(sim: Simulation) -> dict[str, Any]:
    """dcgm-exporter as the GPU Operator's ServiceMonitor has it: one target per GPU node,
    the node's name in `Hostname` (what serve's prometheus.node_label reads)."""
    netloc = urllib.parse.urlsplit(sim.metrics.url).netloc
    return {
        "job_name": "dcgm-exporter",
        "honor_labels": True,
        "static_configs": [
            {
                "targets": [netloc],
                "labels": {
                    "__metrics_path__": urllib.parse.urlsplit(sim.metrics.node_url(node)).path,
                    "Hostname": node,
                },
            }
            for node in sim.node_names()
            if node.startswith("gpu-")
        ],
    }


def resolved(fault: faults.FaultResult) -> dict[str, Any]:
    """Alertmanager's webhook once the fault's alerts resolve (as `gpubot drill` sends it)."""
    ends = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    alerts = [{**a, "status": "resolved", "endsAt": ends} for a in fault.alerts]
    payload = faults.FaultResult(fault.fault, fault.node, [], alerts).payload()
    return {**payload, "status": "resolved"}


@dataclass
class Shown:
    """What a failed wait prints: serve's logs, the incident's timeline, the refusals."""

    bot: Any
    records: SqlStore
    api: SimulatedApiServer

    def logs(self) -> str:
        entries = [
            f"  {e.kind:12} {e.text[:160]}"
            for i in self.records.incidents(node=NODE)
            for e in self.records.timeline(i.id)
        ]
        refused = [str(e) for e in self.api.audit() if e.code >= 400]
        return "\n".join(
            [self.bot.logs(), "timeline:", *entries, "refused requests:", *refused[-20:]]
        )


def run_the_loop(sim: Simulation, tmp_path: Path) -> Loop:
    store, api = sim.api.store, sim.api
    done = Loop(must_leave=evictable_pods(store, NODE))

    def step(name: str) -> None:
        done.steps.append((name, len(api.audit())))

    url = f"sqlite:///{tmp_path / 'gpubot.db'}"
    with prometheus_server([_dcgm_scrape(sim)]) as prometheus:
        config = write_settings(tmp_path / "settings.yaml", prometheus.url)
        with running_gpubot(tmp_path, api.url, url, config) as bot:
            step("start: permission check, leader Lease, watches")
            serve = bot.start("gpubot-0", watch=True, env=in_cluster(api, NAMESPACE, RELEASE))
            records = SqlStore.open(url)
            shown = Shown(bot, records, api)
            try:
                step("alert → diagnosis → drain proposed")
                fault = faults.inject(store, "xid", NODE, datetime.now(UTC), code=79, gpu=3)
                status, answer = post_alert(serve, fault.payload())
                assert (status, answer["accepted"]) == (200, 1), answer
                drain = wait_for("the drain request", lambda: the_request(records, NODE), 60, shown)

                step("approval → cordon → drain")
                bot.approve(drain.id)
                drained = wait_for("the drain", lambda: finished(records, drain.id), 60, shown)
                done.outcomes["drain"] = drained.outcome

                step("repair → health gate with the smoke-test pod → uncordon proposed")
                faults.repair(store, "xid", NODE, datetime.now(UTC))
                status, answer = post_alert(serve, resolved(fault))
                assert (status, answer["accepted"]) == (200, 1), answer
                uncordon = wait_for(
                    "the uncordon request",
                    lambda: the_request(records, NODE, Action.UNCORDON),
                    90,
                    shown,
                )

                done.overrode_gate = uncordon.override_gate
                step("approval → uncordon")
                bot.approve(uncordon.id)
                back = wait_for("the uncordon", lambda: finished(records, uncordon.id), 60, shown)
                done.outcomes["uncordon"] = back.outcome

                step("resolved")
                wait_for(
                    "the incident to resolve",
                    lambda: {i.state for i in records.incidents(node=NODE)} == {RESOLVED},
                    60,
                    shown,
                )
                done.audit = api.audit()
                done.timeline = [
                    e.model_dump(mode="json")
                    for i in records.incidents(node=NODE)
                    for e in records.timeline(i.id)
                ]
            finally:
                records.close()
    done.evicted = set(store.evictions)
    done.direct_deletes = list(store.direct_deletes)
    done.node = store.get(BY_KIND["Node"], "", NODE)
    lease = store.get(BY_KIND["Lease"], NAMESPACE, f"{RELEASE}-leader")
    done.lease_holder = lease["spec"]["holderIdentity"]
    return done


@requires_prometheus
def test_the_whole_loop_runs_as_the_charts_service_account_without_a_401_or_403(
    loop: Loop,
) -> None:
    assert loop.outcomes == {"drain": "succeeded", "uncordon": "succeeded"}
    # The drain evicted what had to leave; the only pod gpubot deleted itself was its own
    # smoke-test pod, in its namespace.
    assert loop.must_leave <= loop.evicted
    assert [ns for ns, _ in loop.direct_deletes] == [NAMESPACE]
    # Back in service: schedulable, the maintenance taint gone.
    assert not loop.node["spec"].get("unschedulable")
    assert MAINTENANCE_TAINT not in {t["key"] for t in loop.node["spec"].get("taints") or []}
    assert loop.lease_holder == "gpubot-0"
    # A plain uncordon, offered because the gate passed: Prometheus saw no new Xid in the
    # window, and the smoke-test pod listed every GPU.
    assert loop.overrode_gate is False
    gates = [e for e in loop.timeline if e["kind"] == "gate"]
    assert gates and gates[-1]["data"]["passed"] is True, gates
    items = {i["name"]: i for i in gates[-1]["data"]["items"]}
    assert items["no-new-gpu-errors"]["outcome"] == "pass"
    assert items["gpu-smoke-test"]["outcome"] == "pass"
    assert items["gpu-smoke-test"]["reason"].startswith("nvidia-smi -L listed all 8 GPUs")

    mine = [e for e in loop.audit if e.user == SA_USER]
    assert len(mine) > 50  # it did run as the ServiceAccount
    refused = [str(e) for e in loop.audit if e.code in (401, 403)]
    assert refused == []
    # The smoke-test pod: created, read, its log read and deleted, in the release namespace.
    smoke_calls = {
        (e.verb, e.resource, e.subresource)
        for e in mine
        if e.namespace == NAMESPACE and e.resource == "pods" and e.code < 300
    }
    assert {("create", "pods", ""), ("get", "pods", "log"), ("delete", "pods", "")} <= smoke_calls


# ---- minimal: every grant used, and none can go --------------------------------------------


@requires_prometheus
@pytest.mark.parametrize("grant", grants(), ids=grant_id)
def test_every_granted_verb_is_used_by_a_named_step_of_the_loop(
    loop: Loop, grant: tuple[str, int, str]
) -> None:
    kind, index, verb = grant
    [role] = [d for d in chart_rbac() if d["kind"] == kind]
    rule = role["rules"][index]
    used = [
        i
        for i, e in enumerate(loop.audit)
        if e.user == SA_USER and e.code < 300 and uses(e, kind, rule, verb)
    ]
    assert used, f"{kind} grants {named(rule, verb)}, and no step of the whole loop used it"
    print(f"{named(rule, verb)}: first used at step {loop.step_of(used[0])!r}")


@pytest.fixture(scope="module")
def bare_sim() -> Iterator[SimulatedApiServer]:
    """One simulator (no controllers) for the runs that lack a permission: each loads its own
    RBAC over the previous one's."""
    sim = start_simulator(4, controllers=False, manifests=yaml.safe_dump_all(chart_rbac()))
    try:
        yield sim.api
    finally:
        sim.stop()


def start_serve(api: SimulatedApiServer, rbac: list[dict[str, Any]], tmp_path: Path) -> Any:
    load_manifests(api.store, yaml.safe_dump_all(rbac))
    env = _env(in_cluster(api, NAMESPACE, RELEASE))
    config = write_settings(tmp_path / "settings.yaml")
    started = time.monotonic()
    done = subprocess.run(
        [
            *(sys.executable, "-m", "bot.commands", "serve", "--in-cluster"),
            *("--config", str(config), "--port", "0", "--log-level", "warning"),
            *("--store-url", f"sqlite:///{tmp_path / 'gpubot.db'}"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert time.monotonic() - started < 30  # it stopped; it did not retry
    return done


def test_serve_stops_with_one_line_naming_the_missing_permission(
    bare_sim: SimulatedApiServer, tmp_path: Path
) -> None:
    rbac = chart_rbac()
    [role] = [d for d in rbac if d["kind"] == "ClusterRole"]
    # The chart's ClusterRole without `patch` on nodes: no cordon, no uncordon.
    role["rules"][0]["verbs"] = ["get", "list", "watch"]
    done = start_serve(bare_sim, rbac, tmp_path)
    assert done.returncode == 2, done.stderr
    assert "listening" not in done.stdout
    assert done.stderr.strip().splitlines() == [
        "error: the Kubernetes credentials lack 1 permission(s) gpubot needs: patch nodes "
        "(grant them, e.g. with the Helm chart's RBAC)"
    ], done.stderr


def rules() -> list[tuple[str, int]]:
    """(kind, rule index) for every rule of the chart's ClusterRole and Role."""
    return [
        (doc["kind"], index)
        for doc in chart_rbac()
        if doc["kind"] in ("ClusterRole", "Role")
        for index in range(len(doc["rules"]))
    ]


def rule_id(rule: tuple[str, int]) -> str:
    kind, index = rule
    [doc] = [d for d in chart_rbac() if d["kind"] == kind]
    granted = doc["rules"][index]
    return f"{kind}-{'+'.join(granted['verbs'])}-{'+'.join(granted['resources'])}"


@pytest.mark.parametrize("rule", rules(), ids=rule_id)
def test_without_any_one_rule_serve_stops_at_start_naming_what_it_granted(
    bare_sim: SimulatedApiServer, tmp_path: Path, rule: tuple[str, int]
) -> None:
    kind, index = rule
    rbac = chart_rbac()
    [role] = [d for d in rbac if d["kind"] == kind]
    removed = role["rules"].pop(index)
    done = start_serve(bare_sim, rbac, tmp_path)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    scope = f" -n {NAMESPACE}" if kind == "Role" else ""
    if kind == "ClusterRole" and removed["resources"] != ["nodes"]:
        scope = " (all namespaces)"
    missing = [f"{named(removed, verb)}{scope}" for verb in removed["verbs"]]
    assert line == (
        f"error: the Kubernetes credentials lack {len(missing)} permission(s) gpubot needs: "
        f"{'; '.join(missing)} (grant them, e.g. with the Helm chart's RBAC)"
    ), line


# ---- what an operator is told: `kubectl auth can-i --as` -------------------------------------


def can_i(rule: dict[str, Any], verb: str) -> list[str]:
    """The rule's verb as `kubectl auth can-i` arguments: a subresource with --subresource
    (`pods/eviction` would be the pod named `eviction`), a resource name after a slash."""
    group, resource = rule["apiGroups"][0], rule["resources"][0]
    base, _, sub = resource.partition("/")
    target = f"{base}.{group}" if group else base
    if rule.get("resourceNames"):
        target += f"/{rule['resourceNames'][0]}"
    return [verb, target, *([f"--subresource={sub}"] if sub else [])]


@needs_kubectl
def test_can_i_as_the_charts_service_account_answers_from_the_charts_rbac(
    tmp_path: Path,
) -> None:
    """How the Kubernetes docs check a ServiceAccount's RBAC: `kubectl auth can-i ...
    --as=system:serviceaccount:NS:NAME`, run by an admin. Every verb the chart grants is a
    yes, in the scope it grants it; what it does not grant is a no (kube-apiserver answers
    for the impersonated account, not for the admin who asked)."""
    with running() as api:
        load_manifests(api.store, yaml.safe_dump_all(chart_rbac()))
        kubectl = kubectl_as(api, tmp_path)
        as_gpubot = f"--as={SA_USER}"
        for kind, index, verb in grants():
            [role] = [d for d in chart_rbac() if d["kind"] == kind]
            args = can_i(role["rules"][index], verb)
            scope = ["-n", NAMESPACE if kind == "Role" else "ml"]
            done = kubectl("auth", "can-i", *args, *scope, as_gpubot)
            assert (done.stdout.strip(), done.returncode) == ("yes", 0), (args, done.stderr)
        for args in (
            ["delete", "nodes"],
            ["update", "nodes"],
            ["delete", "pods", "-n", "ml"],
            ["create", "pods", "-n", "ml"],
            ["get", "secrets", "-n", NAMESPACE],
            ["update", "leases.coordination.k8s.io/someone-else", "-n", NAMESPACE],
        ):
            done = kubectl("auth", "can-i", *args, as_gpubot)
            assert (done.stdout.strip(), done.returncode) == ("no", 1), (args, done.stderr)
