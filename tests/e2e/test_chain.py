"""The alert chain of issue 4 with real processes, end to end:

    fault in the simulator -> simulated dcgm-exporter / kube-state-metrics series
    -> the real Prometheus evaluates our shipped rules (deploy/prometheus/gpu-alerts.yaml)
    -> the real Alertmanager routes with our shipped receiver (deploy/alertmanager/receiver.yaml)
    -> `gpubot serve` (a subprocess) stores the webhook, diagnoses, opens an incident with
       evidence it asked Prometheus for -> the repair resolves the alert -> the incident.

What is changed for the test, and only that: the rules' `for:` durations (at most 1 s) and
Alertmanager's `group_wait` / `group_interval` (1 s), both rewritten from the shipped files
by code; the webhook URL and the token file path. The expressions, labels, route and
receiver are the shipped ones.

One set of processes serves the module (each fault on its own node, so the tests do not see
each other's): the simulator's API and dcgm-exporter in this process, a small
kube-state-metrics stand-in rendering the simulator's nodes at scrape time, `gpubot serve
--no-watch` (every incident comes through the webhook, none from Kubernetes watches),
Alertmanager, Prometheus. Nothing sleeps a fixed time: every wait polls with a deadline, and
a test that fails prints the tails of serve's, Alertmanager's and Prometheus' logs and the
alerts and incidents each of them holds.

Start order: serve first (Alertmanager's config needs its port), then Alertmanager, then
Prometheus (its config needs Alertmanager's). serve also needs Prometheus' URL for the
evidence, which does not exist yet when serve starts: serve is given a relay in this process
that forwards to Prometheus once it is up (`tests.helpers.servers.prometheus_server` picks its own
port).
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from bot.kube_objects import labels_of, name_of
from bot.model import Incident, IncidentState, TimelineEntry
from bot.store.sql import SqlStore
from gpusim.faults import inject
from gpusim.launching import Simulation, start_simulator
from gpusim.resources import BY_KIND
from gpusim.serving import LoopbackServer
from gpusim.state import ClusterState
from tests.helpers.paths import REPO
from tests.helpers.servers import (
    AlertmanagerServer,
    PrometheusServer,
    ServerError,
    Target,
    alertmanager_server,
    poll,
    prometheus_server,
    requires_alertmanager,
    requires_prometheus,
)

pytestmark = [requires_prometheus, requires_alertmanager]

ALERTS = REPO / "deploy" / "prometheus" / "gpu-alerts.yaml"
RECEIVER = REPO / "deploy" / "alertmanager" / "receiver.yaml"
GPU_NODES = 4
XID_NODE, ECC_NODE, ZERO_NODE = "gpu-a2", "gpu-a1", "gpu-a3"
TOKEN = "chain-test-token-3f9c"
SERVE_START_S = 45.0
CHAIN_S = 30.0
"""Fault to incident (or repair to resolved): scrape 1 s + evaluation 1 s + Alertmanager
1 s + serve's diagnosis; generous for a loaded 2-core CI machine."""

T = TypeVar("T")


# ---- the shipped configuration, made fast ---------------------------------------------------


def _seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    parts = re.findall(r"(\d+)(ms|s|m|h|d)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    return sum(int(n) * units[u] for n, u in parts)


def fast_rules(path: Path) -> Path:
    """deploy/prometheus/gpu-alerts.yaml with every `for:` cut to at most 1 s; the rest as
    shipped."""
    doc = yaml.safe_load(ALERTS.read_text())
    shortened = 0
    for group in doc["groups"]:
        for rule in group["rules"]:
            if "for" in rule and _seconds(str(rule["for"])) > 1:
                rule["for"] = "1s"
                shortened += 1
    assert shortened, "no rule waits: nothing to shorten (has the file changed?)"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def alertmanager_config(serve_port: int, token_file: Path) -> str:
    """deploy/alertmanager/receiver.yaml pointed at this serve, waiting 1 s instead of 10 s
    and 1 min; route, grouping, send_resolved and the bearer token as shipped."""
    doc = yaml.safe_load(RECEIVER.read_text())
    route = doc["route"]
    route.update(group_wait="1s", group_interval="1s")
    (receiver,) = [r for r in doc["receivers"] if r["name"] == route["receiver"]]
    (hook,) = receiver["webhook_configs"]
    assert hook["send_resolved"] is True
    hook["url"] = f"http://127.0.0.1:{serve_port}/alertmanager"
    authorization = hook["http_config"]["authorization"]
    assert authorization["type"] == "Bearer"
    authorization["credentials_file"] = str(token_file)
    return yaml.safe_dump(doc, sort_keys=False)


# ---- small HTTP helpers in this process -----------------------------------------------------


def _serve(name: str, answer: Callable[[str], tuple[int, bytes, str]]) -> LoopbackServer:
    """A loopback server answering every GET with `answer(path)` -> (status, body, type)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            try:
                status, body, content_type = answer(self.path)
            except Exception as exc:  # a test helper must answer, not hang the scraper
                status, body, content_type = 500, f"{exc}\n".encode(), "text/plain"
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = LoopbackServer(Handler, 0, name)
    server.start()
    return server


class Relay:
    """Forwards GETs to `target` (set once Prometheus is up); 503 until then."""

    def __init__(self) -> None:
        self.target: str | None = None
        self._http = _serve("prometheus-relay", self._forward)
        self.url = self._http.url

    def _forward(self, path: str) -> tuple[int, bytes, str]:
        if self.target is None:
            return 503, b"prometheus not started yet\n", "text/plain"
        try:
            with urllib.request.urlopen(self.target + path, timeout=10) as response:
                return response.status, response.read(), response.headers["Content-Type"]
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read(), exc.headers.get("Content-Type", "text/plain")
        except OSError as exc:
            return 502, f"{exc}\n".encode(), "text/plain"

    def stop(self) -> None:
        self._http.stop()


def _label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _ksm_resource(name: str) -> str:
    """kube-state-metrics' `resource` label: nvidia.com/gpu -> nvidia_com_gpu."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def kube_state_metrics(store: ClusterState) -> str:
    """The kube-state-metrics node series the shipped GPUCapacityZero rule reads, rendered
    from the simulator's Node objects as they are now: `kube_node_status_allocatable` (the
    nvidia.com/* resources), `kube_node_status_condition`, `kube_node_created` and
    `kube_node_labels` (with `--metric-labels-allowlist=nodes=[nvidia.com/gpu.present]`)."""
    families: dict[str, list[str]] = {
        "kube_node_created": [],
        "kube_node_labels": [],
        "kube_node_status_condition": [],
        "kube_node_status_allocatable": [],
    }
    nodes, _ = store.list(BY_KIND["Node"], "")
    for node in nodes:
        name = _label_value(name_of(node))
        created = datetime.fromisoformat(node["metadata"]["creationTimestamp"])
        families["kube_node_created"].append(f'{{node="{name}"}} {created.timestamp():.0f}')
        present = labels_of(node).get("nvidia.com/gpu.present")
        extra = f',label_nvidia_com_gpu_present="{_label_value(present)}"' if present else ""
        families["kube_node_labels"].append(f'{{node="{name}"{extra}}} 1')
        for condition in (node.get("status") or {}).get("conditions") or []:
            for status in ("true", "false", "unknown"):
                value = int(str(condition.get("status", "")).lower() == status)
                families["kube_node_status_condition"].append(
                    f'{{node="{name}",condition="{_label_value(condition["type"])}",'
                    f'status="{status}"}} {value}'
                )
        for resource, quantity in ((node.get("status") or {}).get("allocatable") or {}).items():
            if resource.startswith("nvidia.com/"):
                families["kube_node_status_allocatable"].append(
                    f'{{node="{name}",resource="{_ksm_resource(resource)}",unit="integer"}} '
                    f"{int(quantity)}"
                )
    text = []
    for family, samples in families.items():
        text += [f"# HELP {family} {family} (gpubot test stand-in)", f"# TYPE {family} gauge"]
        text += [family + sample for sample in samples]
    return "\n".join(text) + "\n"


# ---- the chain ------------------------------------------------------------------------------


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@dataclass
class Chain:
    sim: Simulation
    serve: subprocess.Popen[bytes]
    serve_out: Path
    serve_err: Path
    store_url: str
    db: SqlStore
    alertmanager: AlertmanagerServer
    prometheus: PrometheusServer
    rules: Path
    """The rule file Prometheus runs."""

    @property
    def cluster(self) -> ClusterState:
        return self.sim.api.store

    def serve_alive(self) -> None:
        code = self.serve.poll()
        if code is not None:
            raise ServerError(f"gpubot serve exited with {code}")

    def diagnostics(self) -> str:
        parts = [
            f"--- gpubot serve stderr ---\n{_tail(self.serve_err)}",
            f"--- gpubot serve stdout ---\n{_tail(self.serve_out, 20)}",
            f"--- alertmanager log ---\n{self.alertmanager.log_tail()}",
            f"--- prometheus log ---\n{self.prometheus.log_tail()}",
        ]
        try:
            rules = [
                (a["labels"].get("alertname"), a["labels"].get("node"), a["state"])
                for a in self.prometheus.alerts()
            ]
            held = [
                (a["labels"].get("alertname"), a["labels"].get("node"), a["status"]["state"])
                for a in self.alertmanager.alerts()
            ]
            parts.append(f"--- prometheus alerts ---\n{rules}\n--- alertmanager alerts ---\n{held}")
        except (OSError, ServerError) as exc:
            parts.append(f"--- alerts: unavailable: {exc}")
        try:
            incidents = [(i.id, i.node, i.rule, i.state.value) for i in self.db.incidents()]
            parts.append(f"--- gpubot incidents ---\n{incidents}")
        except Exception as exc:  # diagnostics must not hide the failure they explain
            parts.append(f"--- incidents: unavailable: {exc}")
        return "\n".join(parts)

    def wait(self, what: str, check: Callable[[], T | None], timeout_s: float = CHAIN_S) -> T:
        try:
            found: T = poll(check, timeout_s, what, interval_s=0.2, alive=self.serve_alive)
        except (TimeoutError, ServerError) as exc:
            pytest.fail(str(exc))
        return found

    def incident(self, node: str, rule: str) -> Incident | None:
        found = [i for i in self.db.incidents(node=node) if i.rule == rule]
        return found[-1] if found else None

    def wait_incident(self, node: str, rule: str) -> Incident:
        return self.wait(f"an incident {rule} on {node}", lambda: self.incident(node, rule))

    def wait_resolved(self, incident: Incident) -> Incident:
        def resolved() -> Incident | None:
            now = self.db.incident(incident.id)
            return now if now.state is IncidentState.RESOLVED else None

        return self.wait(f"incident {incident.id} ({incident.rule}) resolved", resolved)

    def alert_statuses(self, node: str, alert: str) -> list[str]:
        """The deliveries of `alert` for `node` that serve stored, oldest first."""
        return [s.status for s in self.db.signals(node=node) if s.name == alert]

    def evidence(self, incident: Incident) -> list[str]:
        """The evidence lines of the incident's diagnosis, as its timeline recorded them."""
        entries: list[TimelineEntry] = self.db.timeline(incident.id)
        (entry,) = [e for e in entries if e.kind == "diagnosis"]
        lines = entry.data["evidence"]
        assert isinstance(lines, list)
        return [str(line) for line in lines]


def explained(test: Callable[[Chain], None]) -> Callable[[Chain], None]:
    """A chain test that, when it fails, prints the tails of every process' log and what
    Prometheus, Alertmanager and serve held (pytest shows it under "Captured stdout")."""

    @functools.wraps(test)
    def run(chain: Chain) -> None:
        try:
            test(chain)
        except BaseException:
            print(chain.diagnostics())
            raise

    return run


def _start_serve(
    stack: ExitStack, workdir: Path, kube_url: str, store_url: str, prometheus_url: str
) -> tuple[subprocess.Popen[bytes], Path, Path, int]:
    out, err = workdir / "serve.out", workdir / "serve.err"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUBOT_")}
    env.update(
        GPUBOT_SERVE__BEARER_TOKEN=TOKEN,
        GPUBOT_SERVE__HOST="127.0.0.1",
        GPUBOT_PROMETHEUS__URL=prometheus_url,
        # An hour compressed into the test's seconds: a symptom gone for 2 s is gone, and
        # the leader looks every second at what time alone changes.
        GPUBOT_THRESHOLDS__RESOLVE_AFTER_S="2",
        GPUBOT_SCHEDULE__FOLLOW_UP_S="1",
    )
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bot.commands",
                "serve",
                "--kube-url",
                kube_url,
                "--port",
                "0",
                "--store-url",
                store_url,
                "--no-watch",
            ],
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
        )

    def stop() -> None:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)

    stack.callback(stop)

    def alive() -> None:
        if process.poll() is not None:
            raise ServerError(f"gpubot serve exited with {process.returncode}")

    def port() -> int | None:
        found = re.search(r"gpubot serve: listening on (\d+)", out.read_text(errors="replace"))
        return int(found.group(1)) if found else None

    try:
        bound: int = poll(port, SERVE_START_S, "gpubot serve: listening", 0.1, alive)
    except (TimeoutError, ServerError) as exc:
        pytest.fail(f"{exc}\n--- stderr ---\n{_tail(err)}\n--- stdout ---\n{_tail(out)}")
    return process, out, err, bound


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    workdir = tmp_path_factory.mktemp("chain")
    store_url = f"sqlite:///{workdir / 'gpubot.db'}"
    with ExitStack() as stack:
        sim = start_simulator(GPU_NODES, controllers=False)
        stack.callback(sim.stop)
        cluster = sim.api.store
        ksm = _serve(
            "kube-state-metrics",
            lambda _path: (
                200,
                kube_state_metrics(cluster).encode(),
                "text/plain; version=0.0.4; charset=utf-8",
            ),
        )
        stack.callback(ksm.stop)
        relay = Relay()
        stack.callback(relay.stop)

        serve, out, err, port = _start_serve(stack, workdir, sim.api.url, store_url, relay.url)
        token_file = workdir / "token"
        token_file.write_text(TOKEN)
        alertmanager = stack.enter_context(
            alertmanager_server(alertmanager_config(port, token_file))
        )
        targets = [
            Target(sim.metrics.node_url(f"gpu-a{i}"), {"instance": f"gpu-a{i}"})
            for i in range(1, GPU_NODES + 1)
        ]
        targets.append(Target(ksm.url + "/metrics", job="kube-state-metrics"))
        rules = fast_rules(workdir / "gpu-alerts.yaml")
        prometheus = stack.enter_context(prometheus_server(targets, [rules], alertmanager.url))
        relay.target = prometheus.url
        db = SqlStore.open(store_url, migrate=False)
        stack.callback(db.close)
        yield Chain(sim, serve, out, err, store_url, db, alertmanager, prometheus, rules)


def gpubot_timeline(chain: Chain, node: str) -> list[dict[str, Any]]:
    """`gpubot timeline NODE --format json`: one JSON object per incident of the node."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bot.commands",
            "timeline",
            node,
            "--store-url",
            chain.store_url,
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


# ---- the tests ------------------------------------------------------------------------------


@explained
def test_the_shipped_configuration_is_what_runs(chain: Chain) -> None:
    """Prometheus runs the shipped rules (only `for:` shortened) and Alertmanager the shipped
    route and receiver: what the other tests prove, they prove of those."""
    shipped = yaml.safe_load(ALERTS.read_text())
    running_rules = yaml.safe_load(chain.rules.read_text())
    for ours, theirs in zip(shipped["groups"], running_rules["groups"], strict=True):
        for rule, fast in zip(ours["rules"], theirs["rules"], strict=True):
            assert {k: v for k, v in fast.items() if k != "for"} == {
                k: v for k, v in rule.items() if k != "for"
            }
    loaded = chain.prometheus.get_json("/api/v1/rules")["data"]["groups"]
    assert [g["name"] for g in loaded] == [g["name"] for g in shipped["groups"]]
    for group, ours in zip(loaded, shipped["groups"], strict=True):
        assert [r["name"] for r in group["rules"]] == [r["alert"] for r in ours["rules"]]
        assert all(r["health"] != "err" and r["duration"] <= 1 for r in group["rules"])
    status = chain.alertmanager.get_json("/api/v2/status")
    running = yaml.safe_load(status["config"]["original"])
    shipped_route = yaml.safe_load(RECEIVER.read_text())["route"]
    assert running["route"]["receiver"] == shipped_route["receiver"] == "gpubot"
    assert running["route"]["group_by"] == shipped_route["group_by"]
    (hook,) = running["receivers"][0]["webhook_configs"]
    assert hook["send_resolved"] is True and hook["url"].endswith("/alertmanager")


@explained
def test_xid_79_to_an_incident_with_prometheus_evidence_and_resolved_by_the_reboot(
    chain: Chain,
) -> None:
    injected = datetime.now(UTC)
    inject(chain.cluster, "xid", XID_NODE, injected, code=79, gpu=3)

    # The shipped GPUXidError fires from the Xid gauge the lost GPU still reports.
    firing = chain.prometheus.wait_for(
        f'ALERTS{{alertname="GPUXidError", alertstate="firing", node="{XID_NODE}"}}',
        bool,
        timeout_s=CHAIN_S,
    )
    assert {(a["metric"]["gpu"], a["metric"]["xid"]) for a in firing} == {("3", "79")}
    assert firing[0]["metric"]["severity"] == "critical"

    incident = chain.wait_incident(XID_NODE, "gpu-fell-off-bus")
    assert incident.severity.value == "critical"
    # It came through Alertmanager's webhook (serve does not watch Kubernetes here).
    alerts = [s for s in chain.db.signals(node=XID_NODE) if s.name == "GPUXidError"]
    assert alerts and {s.source for s in alerts} == {"alertmanager"}
    assert {(s.gpu, s.labels["xid"], s.status) for s in alerts} == {("3", "79", "firing")}
    # Evidence asked from Prometheus when diagnosing (bot/facts/gpu_metrics.py `lines`): the
    # Xid, counted by DCGM_EXP_XID_ERRORS_COUNT; its time only once the evidence's subquery
    # (15 s steps over 30 min) has a step after the change, so maybe not yet.
    evidence = chain.evidence(incident)
    from_prometheus = re.compile(r"GPU 3: Xid 79( at \d\d:\d\d UTC)?, 1× counted")
    prometheus_lines = [line for line in evidence if from_prometheus.fullmatch(line)]
    assert prometheus_lines, evidence
    assert any(line.startswith(f"{XID_NODE}: ") and "reporting" in line for line in evidence)

    # The repair: a reboot brings the GPU back with a clean gauge; the alert resolves, and so
    # does the incident.
    inject(chain.cluster, "reboot", XID_NODE, datetime.now(UTC))
    resolved = chain.wait_resolved(incident)
    assert resolved.resolved_at is not None
    # Alertmanager's send_resolved delivery is what made serve look again.
    assert chain.alert_statuses(XID_NODE, "GPUXidError") == ["firing", "resolved"]
    assert chain.db.firing_alerts(XID_NODE) == []
    assert chain.prometheus.query(f'ALERTS{{alertname="GPUXidError", node="{XID_NODE}"}}') == []

    # What an on-call sees with the CLI.
    shown = [
        t for t in gpubot_timeline(chain, XID_NODE) if t["incident"]["rule"] == "gpu-fell-off-bus"
    ]
    assert [t["incident"]["state"] for t in shown] == ["resolved"]
    kinds = [entry["kind"] for entry in shown[0]["timeline"]]
    assert "diagnosis" in kinds
    (diagnosed,) = [e for e in shown[0]["timeline"] if e["kind"] == "diagnosis"]
    assert prometheus_lines[0] in diagnosed["data"]["evidence"]
    assert any("no longer matches" in json.dumps(e) for e in shown[0]["timeline"])


@explained
def test_double_bit_ecc_error_to_an_ecc_incident_resolved_by_the_reset(chain: Chain) -> None:
    inject(chain.cluster, "ecc-dbe", ECC_NODE, datetime.now(UTC), gpu=5)
    incident = chain.wait_incident(ECC_NODE, "gpu-ecc-error")
    assert incident.severity.value == "critical"
    names = {(s.name, s.gpu, s.source) for s in chain.db.signals(node=ECC_NODE)}
    assert ("GPUECCDoubleBitError", "5", "alertmanager") in names
    evidence = chain.evidence(incident)
    assert any(line.startswith("GPUECCDoubleBitError GPU 5") for line in evidence), evidence
    # From Prometheus: the volatile DBE counter moved, and the Xid 48 the driver logs with it.
    assert any(re.fullmatch(r"GPU 5: ECC DBE \+1 in .+ \(total 1\)", x) for x in evidence)
    assert any(re.fullmatch(r"GPU 5: Xid 48( at .+)?, 1× counted", x) for x in evidence)
    # That Xid is told by the ECC incident, not by a second one.
    assert chain.incident(ECC_NODE, "gpu-xid-error") is None

    # A reboot resets the GPU: the volatile count (and the Xid gauge) go back to 0, the
    # shipped rule stops matching, and the incident resolves.
    inject(chain.cluster, "reboot", ECC_NODE, datetime.now(UTC))
    chain.wait_resolved(incident)
    assert chain.alert_statuses(ECC_NODE, "GPUECCDoubleBitError") == ["firing", "resolved"]


@explained
def test_capacity_zero_from_kube_state_metrics_to_an_incident_resolved_by_the_reboot(
    chain: Chain,
) -> None:
    inject(chain.cluster, "zero-capacity", ZERO_NODE, datetime.now(UTC))
    chain.prometheus.wait_for(
        f'kube_node_status_allocatable{{node="{ZERO_NODE}", resource="nvidia_com_gpu"}} == 0',
        bool,
        timeout_s=CHAIN_S,
    )
    incident = chain.wait_incident(ZERO_NODE, "gpu-capacity-zero")
    assert incident.severity.value == "critical"
    delivered = [s for s in chain.db.signals(node=ZERO_NODE) if s.name == "GPUCapacityZero"]
    assert delivered and {s.source for s in delivered} == {"alertmanager"}
    evidence = chain.evidence(incident)
    assert any(line.startswith("allocatable nvidia.com/gpu=0, capacity=8") for line in evidence)
    assert chain.incident(ZERO_NODE, "gpu-capacity-short") is None

    # After the reboot a fresh device plugin offers every GPU again.
    inject(chain.cluster, "reboot", ZERO_NODE, datetime.now(UTC))
    chain.wait_resolved(incident)
    assert chain.alert_statuses(ZERO_NODE, "GPUCapacityZero") == ["firing", "resolved"]
