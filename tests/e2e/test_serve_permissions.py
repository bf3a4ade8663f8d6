"""`gpubot serve --in-cluster` as a pod would run it: its ServiceAccount's projected token and
CA, KUBERNETES_SERVICE_HOST/PORT, against the simulated cluster's HTTPS API with RBAC.

- With the Helm chart's RBAC (rendered by Helm, loaded into the simulator as `kubectl apply`
  would create it), serve passes its start-up permission check and drains a node an on-call
  approved: the chart grants what gpubot does.
- With a ServiceAccount that lacks a permission, serve stops at once with one line naming it,
  instead of starting and failing every request with 403.
- The chart grants nothing more: without any one verb of any rule of its ClusterRole or Role,
  serve stops at start naming exactly that permission.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.store.sql import SqlStore
from gpusim.launching import load_manifests
from gpusim.resources import BY_KIND
from tests.helpers.kubectl import kubectl_as, needs_kubectl
from tests.helpers.paths import REPO
from tests.helpers.processes import (
    NODE,
    _env,
    cluster,
    evictable_pods,
    finished,
    in_cluster,
    post_alert,
    running_gpubot,
    simulator,
    the_request,
    wait_for,
    write_settings,
    xid_alert,
)

helm = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")

NAMESPACE = "gpubot"
RELEASE = "gpubot"
"""The chart's release: its fullname is `gpubot`, so the leader Lease is gpubot/gpubot-leader,
which is also serve's default (the chart writes it into the settings it mounts)."""


def chart_rbac() -> str:
    """The chart's ServiceAccount, ClusterRole, Role and bindings, rendered by Helm."""
    with helm.Chart.load(str(REPO / "helm" / "gpubot")) as chart:
        rendered: dict[str, str] = chart.render(
            {}, name=RELEASE, namespace=NAMESPACE, is_install=True
        )
    kinds = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    documents = [
        doc
        for path, text in rendered.items()
        if path.endswith((".yaml", ".yml"))
        for doc in yaml.safe_load_all(text)
        if doc and doc.get("kind") in kinds
    ]
    assert {d["kind"] for d in documents} == kinds
    return yaml.safe_dump_all(documents)


@needs_kubectl
def test_the_charts_service_account_passes_the_check_and_drains_an_approved_node(
    tmp_path: Path,
) -> None:
    sim_store = cluster()
    loaded = load_manifests(sim_store, chart_rbac())
    assert f"ServiceAccount {NAMESPACE}/gpubot" in loaded
    must_leave = evictable_pods(sim_store, NODE)
    url = f"sqlite:///{tmp_path / 'gpubot.db'}"
    with simulator(sim_store) as server, running_gpubot(tmp_path, server.url, url) as bot:
        # What the chart grants, as its ServiceAccount sees it (kubectl auth can-i):
        sa = kubectl_as(server, tmp_path, (NAMESPACE, "gpubot"))
        assert sa("auth", "can-i", "patch", "nodes").stdout.strip() == "yes"
        assert sa("auth", "can-i", "delete", "pods", "-n", "ml").stdout.strip() == "no"
        serve = bot.start("gpubot-0", env=in_cluster(server, NAMESPACE, "gpubot"))
        store = SqlStore.open(url)
        try:
            status, answer = post_alert(serve, xid_alert(sim_store, NODE))
            assert (status, answer["accepted"]) == (200, 1), answer
            drain = wait_for("the drain request", lambda: the_request(store, NODE), 30, bot)
            bot.approve(drain.id)
            done = wait_for("the drain to finish", lambda: finished(store, drain.id), 60, bot)
            assert done.outcome == "succeeded", done
        finally:
            store.close()
        node = sim_store.get(BY_KIND["Node"], "", NODE)
        assert node["spec"]["unschedulable"] is True
        assert set(sim_store.evictions) == must_leave
        assert sim_store.direct_deletes == []
        lease = sim_store.get(BY_KIND["Lease"], NAMESPACE, "gpubot-leader")
        assert lease["spec"]["holderIdentity"] == "gpubot-0"


def test_serve_stops_with_one_line_naming_the_missing_permission(tmp_path: Path) -> None:
    rbac: list[dict[str, Any]] = list(yaml.safe_load_all(chart_rbac()))
    [role] = [d for d in rbac if d["kind"] == "ClusterRole"]
    # The chart's ClusterRole without `patch` on nodes: no cordon, no uncordon.
    role["rules"][0]["verbs"] = ["get", "list", "watch"]
    sim_store = cluster()
    load_manifests(sim_store, yaml.safe_dump_all(rbac))
    with simulator(sim_store) as server:
        env = _env(in_cluster(server, NAMESPACE, "gpubot"))
        config = write_settings(tmp_path / "settings.yaml")
        started = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "bot.cli",
                "serve",
                "--in-cluster",
                "--config",
                str(config),
                "--port",
                "0",
                "--store-url",
                f"sqlite:///{tmp_path / 'gpubot.db'}",
                "--log-level",
                "warning",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        took = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    assert "listening" not in done.stdout
    lines = done.stderr.strip().splitlines()
    assert lines == [
        "error: the Kubernetes credentials lack 1 permission(s) gpubot needs: patch nodes "
        "(grant them, e.g. with the Helm chart's RBAC)"
    ], done.stderr
    assert took < 30  # it stopped; it did not retry


def _grants() -> list[tuple[str, int, str]]:
    """(kind, rule index, verb) for every verb the chart's ClusterRole and Role grant."""
    rbac = list(yaml.safe_load_all(chart_rbac()))
    return [
        (doc["kind"], index, verb)
        for doc in rbac
        if doc["kind"] in ("ClusterRole", "Role")
        for index, rule in enumerate(doc["rules"])
        for verb in rule["verbs"]
    ]


def _start_serve(tmp_path: Path, rbac: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    sim_store = cluster()
    load_manifests(sim_store, yaml.safe_dump_all(rbac))
    with simulator(sim_store) as server:
        env = _env(in_cluster(server, NAMESPACE, "gpubot"))
        config = write_settings(tmp_path / "settings.yaml")
        return subprocess.run(
            [
                *(sys.executable, "-m", "bot.cli", "serve", "--in-cluster"),
                *("--config", str(config), "--port", "0", "--log-level", "warning"),
                *("--store-url", f"sqlite:///{tmp_path / 'gpubot.db'}"),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )


@pytest.mark.parametrize(("kind", "index", "verb"), _grants())
def test_without_any_one_granted_verb_serve_stops_naming_it(
    tmp_path: Path, kind: str, index: int, verb: str
) -> None:
    rbac: list[dict[str, Any]] = list(yaml.safe_load_all(chart_rbac()))
    [role] = [d for d in rbac if d["kind"] == kind]
    rule = role["rules"][index]
    rule["verbs"] = [v for v in rule["verbs"] if v != verb]
    if not rule["verbs"]:
        role["rules"].pop(index)
    resource = rule["resources"][0]
    group = rule["apiGroups"][0]
    done = _start_serve(tmp_path, rbac)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    named = f"{resource}.{group}" if group else resource
    assert "lack 1 permission(s)" in line and f": {verb} {named}" in line, line
