"""The simulator as a monitoring stack sees it, in three commands: `gpubot sim serve
--prometheus-config-out FILE` (its exporters' addresses in one JSON line and a scrape config),
the real Prometheus on that config with the shipped alert rules, and `gpubot sim inject`: the
shipped GPUCapacityZero alert fires from kube-state-metrics' series, as in a real cluster.

Only the rules' `for:` durations are cut to 1 s and the scrape interval to 1 s; the
expressions and the scrape targets are the shipped and the written ones.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers.paths import REPO
from tests.helpers.servers import prometheus_server, requires_prometheus

pytestmark = requires_prometheus

ALERTS = REPO / "deploy" / "prometheus" / "gpu-alerts.yaml"


def fast_rules(path: Path) -> Path:
    """The shipped rules with every `for:` of more than a second cut to 1 s."""
    doc = yaml.safe_load(ALERTS.read_text())
    for group in doc["groups"]:
        for rule in group["rules"]:
            if "for" in rule and str(rule["for"]) not in ("0s", "1s"):
                rule["for"] = "1s"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def gpubot(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.commands", *args], capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[dict[str, Any], Path]]:
    config = tmp_path / "prometheus.yml"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bot.commands",
            "sim",
            "serve",
            "--nodes",
            "3",
            "--no-controllers",
            "--kubeconfig-out",
            str(tmp_path / "kubeconfig"),
            "--prometheus-config-out",
            str(config),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    lines: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if line.startswith("gpubot sim: "):
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(60)
    try:
        assert lines and lines[-1].startswith("gpubot sim: "), f"sim serve printed {lines}"
        yield json.loads(lines[-1].removeprefix("gpubot sim: ")), config
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_shipped_gpu_capacity_alert_fires_from_the_simulators_exporters(
    served: tuple[dict[str, Any], Path], tmp_path: Path
) -> None:
    ready, config = served
    assert ready["kubeconfig"] == str(tmp_path / "kubeconfig")
    assert ready["dcgm_exporter"] == f"http://127.0.0.1:{ready['dcgm_exporter_port']}"
    with urllib.request.urlopen(ready["kube_state_metrics"] + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    assert (
        'kube_node_status_allocatable{node="gpu-a2",resource="nvidia_com_gpu",unit="integer"} 8'
        in text.splitlines()
    )
    scrape = yaml.safe_load(config.read_text())["scrape_configs"]
    assert {job["job_name"] for job in scrape} == {"dcgm-exporter", "kube-state-metrics"}
    for job in scrape:
        job["scrape_interval"] = job["scrape_timeout"] = "1s"
    with prometheus_server(scrape, rule_files=[fast_rules(tmp_path / "rules.yaml")]) as prom:
        injected = gpubot(
            "sim", "inject", "zero-capacity", "--node", "gpu-a2", "--server", ready["url"]
        )
        assert injected.returncode == 0, injected.stderr
        firing = prom.wait_for(
            'ALERTS{alertname="GPUCapacityZero", alertstate="firing"}',
            lambda result: bool(result),
            timeout_s=30,
        )
        assert {a["metric"]["node"] for a in firing} == {"gpu-a2"}
        assert firing[0]["metric"]["severity"] == "critical"
        up = prom.query('up{job="dcgm-exporter"}')
        assert {s["metric"]["node"] for s in up} == {"gpu-a1", "gpu-a2", "gpu-a3"}


def test_sim_serve_takes_fixed_exporter_ports_and_service_accounts(tmp_path: Path) -> None:
    from tests.helpers.servers import free_port

    dcgm, ksm = free_port(), free_port()
    rbac = tmp_path / "rbac.yaml"
    rbac.write_text("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: bot, namespace: ops}\n")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bot.commands",
            "sim",
            "serve",
            "--nodes",
            "1",
            "--no-controllers",
            "--metrics-port",
            str(dcgm),
            "--state-metrics-port",
            str(ksm),
            "--rbac",
            str(rbac),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    try:
        ready: dict[str, Any] = {}
        for line in process.stdout:
            if line.startswith("gpubot sim: "):
                ready = json.loads(line.removeprefix("gpubot sim: "))
                break
        assert (ready["dcgm_exporter_port"], ready["kube_state_metrics_port"]) == (dcgm, ksm)
        assert re.fullmatch(r"https://127\.0\.0\.1:\d+", ready["server"])
        mounted = Path(ready["serviceaccounts"]["ops/bot"])
        assert (mounted / "namespace").read_text() == "ops"
        assert (mounted / "token").read_text() and (mounted / "ca.crt").read_text()
    finally:
        process.terminate()
        process.wait(timeout=10)
