"""`gpubot drill`: rehearse a scenario on a simulated cluster through the real serving code,
and say whether the on-call would have seen what the drill says they must.

Each drill gets its own world: a simulated cluster (gpusim's API server, scheduler, kubelet
and controllers behind the real kubernetes client), a fresh SQLite store, and one replica
composed exactly as `gpubot serve` composes it (`serve.build_replica`: the rules, the pass,
the leader's duties and schedule, the watches, the HTTP webhook), with a chat that records
what it shows. The script then plays: faults and repairs in the simulator, their alerts
POSTed to the webhook as Alertmanager sends them (after its group_wait), approvals and
denials by named people as a click would make them, `kubectl cordon` by hand, waits.

Time: a drill is minutes, not hours. Unless `real_time` is asked for, the windows that only
make the bot wait (settle, resolve-after, the schedule's periods) are shortened to the
drill's scale; every other setting (approval policies, blast radius, rules, labels) is the
operator's own, which is the point of running drills before deploying them.

What it must never do: reach anything but 127.0.0.1, or judge what it did not see (the
verdict is `bot.drills.judging`'s, on the recorded chat and the stored timelines).

Why one module of about 600 lines: it is the only place allowed to import the simulator
beside `demo` (an import-linter contract), so the world a drill builds (simulator,
Prometheus, Alertmanager's side, the replica) stays here; the drill files' schema, the
recording chat and the judge, which need no simulator, are in `bot.drills`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bot.chat.console import ConsoleChat
from bot.clock import utcnow
from bot.config import Settings
from bot.drills.judging import Offer, Played, Record, Told, Verdict, events, judge, matches
from bot.drills.record import RecordingChat
from bot.drills.spec import (
    Alert,
    Approve,
    ByHand,
    Create,
    Deny,
    Drill,
    Fault,
    Repair,
    Step,
    Wait,
    WaitFor,
    drill_files,
    load_drill,
)
from bot.errors import GpubotError
from bot.model import ActionRequest, IncidentState
from bot.roots import serve
from gpusim import faults
from gpusim.launching import Simulation, start_simulator
from gpusim.resources import BY_KIND

DRILL_TIME: dict[str, Any] = {
    "thresholds": {"settle_s": 8, "resolve_after_s": 8, "revise_every_s": 5},
    "schedule": {
        "leader_duties_s": 0.5,
        "follow_up_s": 1.0,
        "expiry_s": 5.0,
        "drain_watchdog_s": 5.0,
        "sweep_s": 60.0,
    },
    "remediation": {"drain_timeout_s": 120.0},
}
"""Waiting windows at a drill's scale (seconds instead of minutes). A drill's own `settings`
go over these; `--real-time` leaves the operator's."""

EVIDENCE_WINDOW_S = 20
"""The Prometheus window (`prometheus.window_s`) at a drill's scale: the health gate's "no new
Xid, ECC or NVLink error" holds once a repaired GPU has been quiet this long."""

REQUEST_WAIT_S = 30.0
"""How long a scripted approver waits for the buttons to show up before the step fails."""


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def drill_settings(
    base: Settings,
    drill: Drill,
    workdir: Path,
    *,
    real_time: bool,
    prometheus_url: str | None = None,
) -> Settings:
    """The operator's settings, at the drill's time scale, with the drill's own on top, on a
    private store, webhook and lease: nothing of a real deployment is shared."""
    merged = base.model_dump()
    if not real_time:
        merged = _merge(merged, DRILL_TIME)
        merged = _merge(merged, {"prometheus": {"window_s": EVIDENCE_WINDOW_S}})
    merged = _merge(merged, drill.settings)
    harness = {
        "cluster": f"drill-{drill.drill}",
        "store_url": f"sqlite:///{workdir / 'gpubot.db'}",
        "prometheus": {"url": prometheus_url, "node_label": "Hostname"},
        "slack": {"bot_token": None},
        "serve": {
            "host": "127.0.0.1",
            "port": 0,
            "bearer_token": secrets.token_urlsafe(24),
            "bearer_token_file": None,
            "identity": "drill",
        },
        "schedule": {"digest_at": None},
    }
    return Settings.model_validate(_merge(merged, harness))


def _payload(step: Alert) -> dict[str, Any]:
    """One alert as Alertmanager's webhook (version 4) carries it."""
    spec = step.alert
    now = utcnow()
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    canonical = ",".join(f"{k}={v}" for k, v in sorted(spec.labels.items()))
    generator = "http://prometheus:9090/graph?" + urllib.parse.urlencode(
        {"g0.expr": spec.expr or spec.labels.get("alertname", "")}
    )
    alert = {
        "status": spec.status,
        "labels": spec.labels,
        "annotations": spec.annotations,
        "startsAt": stamp,
        "endsAt": stamp if spec.status == "resolved" else "0001-01-01T00:00:00Z",
        "generatorURL": generator,
        "fingerprint": hashlib.sha256(canonical.encode()).hexdigest()[:16],
    }
    # The simulator's own payload builder, as for the alerts its faults fire.
    payload = faults.FaultResult("alert", spec.labels.get("node", ""), [], [alert]).payload()
    return {**payload, "status": spec.status}


class _Prometheus:
    """A real Prometheus scraping the simulated dcgm-exporters every second: the evidence
    `serve` reads (the health gate's Xid window) comes the way it does in a cluster."""

    def __init__(self, binary: str, simulation: Simulation, nodes: list[str], workdir: Path):
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        targets = [
            {
                "targets": [urllib.parse.urlsplit(simulation.metrics.url).netloc],
                "labels": {
                    "__metrics_path__": urllib.parse.urlsplit(
                        simulation.metrics.node_url(node)
                    ).path,
                    "Hostname": node,
                },
            }
            for node in nodes
        ]
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [
                {"job_name": "dcgm-exporter", "honor_labels": True, "static_configs": targets}
            ],
        }
        (workdir / "prometheus.yml").write_text(json.dumps(config))
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'prometheus'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _until("Prometheus ready", self._ready, 30)
        except BaseException:
            self.stop()
            raise

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise GpubotError(f"prometheus exited with {self.process.returncode}")
        try:
            query = urllib.parse.urlencode({"query": "count(up == 1)"})
            with urllib.request.urlopen(f"{self.url}/api/v1/query?{query}", timeout=2) as got:
                result = json.load(got)["data"]["result"]
        except OSError:
            return False
        return bool(result)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class _Alerts:
    """Alertmanager's side of the drill: what fired, for which fault on which node, sent
    after its group_wait; resolved when the fault is repaired."""

    post: Callable[[dict[str, Any]], None]
    firing: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    timers: list[threading.Timer] = field(default_factory=list)

    def later(self, delay: float | None, payload: dict[str, Any]) -> None:
        if delay is None or not payload["alerts"]:
            return
        timer = threading.Timer(delay, self.post, args=(payload,))
        timer.daemon = True
        self.timers.append(timer)
        timer.start()

    def fired(self, step: Fault, result: faults.FaultResult) -> None:
        self.firing.setdefault((step.fault, step.node), []).extend(result.alerts)
        self.later(step.alert_after, result.payload())

    def repaired(self, step: Repair, now: datetime) -> None:
        alerts = self.firing.pop((step.repair, step.node), [])
        ends = now + timedelta(seconds=step.alert_after or 0)
        resolved = [
            {**a, "status": "resolved", "endsAt": ends.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
            for a in alerts
        ]
        if resolved:
            payload = faults.FaultResult(step.repair, step.node, [], resolved).payload()
            self.later(step.alert_after, {**payload, "status": "resolved"})

    def stop(self) -> None:
        for timer in self.timers:
            timer.cancel()


@dataclass
class _World:
    """One drill's simulated cluster and serving replica."""

    simulation: Simulation
    replica: serve.Replica
    chat: RecordingChat
    port: int
    token: str
    thread: threading.Thread
    prometheus: _Prometheus | None

    def webhook(self, payload: dict[str, Any]) -> None:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/alertmanager",
            data=json.dumps(payload).encode(),
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            answer.read()

    def stop(self) -> None:
        self.replica.server.should_exit = True
        self.thread.join(timeout=30)
        if self.prometheus is not None:
            self.prometheus.stop()
        self.simulation.stop()


def _until(what: str, check: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise GpubotError(f"the drill's world did not start: no {what} in {timeout_s:g} s")
        time.sleep(0.05)


def _start(
    drill: Drill,
    base: Settings,
    workdir: Path,
    show: Console,
    *,
    real_time: bool,
    prometheus_bin: str | None,
) -> _World:
    simulation = start_simulator(drill.cluster.gpu_nodes, pods_per_node=drill.cluster.pods_per_node)
    prometheus = None
    try:
        for node in drill.cluster.mig_nodes:
            faults.enable_mig(simulation.api.store, node)
        if prometheus_bin is not None:
            nodes = [f"gpu-a{i + 1}" for i in range(drill.cluster.gpu_nodes)]
            prometheus = _Prometheus(prometheus_bin, simulation, nodes, workdir)
        settings = drill_settings(
            base,
            drill,
            workdir,
            real_time=real_time,
            prometheus_url=prometheus.url if prometheus else None,
        )
        chat = RecordingChat(ConsoleChat(show, settings.lang), utcnow)
        replica = serve.build_replica(settings, kube_url=simulation.api.url, chat=chat)
        bound: list[int] = []
        thread = threading.Thread(
            target=serve.run,
            args=(replica,),
            kwargs={"on_started": bound.append},
            name=f"drill-{drill.drill}",
            daemon=True,
        )
        thread.start()
        _until("webhook listening", lambda: bool(bound), 30)
        _until("leader lease", lambda: replica.elector.is_leader, 30)
        assert replica.watcher is not None
        replica.watcher.wait_synced()
    except BaseException:
        if prometheus is not None:
            prometheus.stop()
        simulation.stop()
        raise
    token = settings.serve.token() or ""
    return _World(simulation, replica, chat, bound[0], token, thread, prometheus)


class _Script:
    """Plays a drill's steps against its world, keeping what the judge needs."""

    def __init__(self, drill: Drill, world: _World) -> None:
        self.drill = drill
        self.world = world
        self.alerts = _Alerts(world.webhook)
        self.started = utcnow()
        self.last_act = self.started
        self.first_fault: tuple[datetime, str] | None = None
        self.told: list[Told] = []
        self.played: list[Played] = []
        self.errors: list[str] = []
        self.deciding: list[threading.Thread] = []
        self._lock = threading.Lock()

    @property
    def cluster(self) -> Any:
        return self.world.simulation.api.store

    def play(self) -> None:
        for index, step in enumerate(self.drill.script, start=1):
            try:
                self.step(step)
            except (GpubotError, faults.FaultError) as exc:
                self.errors.append(f"step {index}: {exc}")
                return

    def step(self, step: Step) -> None:
        if isinstance(step, Fault):
            now = utcnow()
            result = faults.inject(self.cluster, step.fault, step.node, now, **step.params)
            if self.first_fault is None:
                self.first_fault = (now, step.node)
            self.alerts.fired(step, result)
            self.played.append(Played(now, "fault", step.fault, step.node))
            self.last_act = now
        elif isinstance(step, Repair):
            now = utcnow()
            faults.repair(self.cluster, step.repair, step.node, now, **step.params)
            self.alerts.repaired(step, now)
            self.played.append(Played(now, "repair", step.repair, step.node))
            self.last_act = now
        elif isinstance(step, Alert):
            self.world.webhook(_payload(step))
            self.last_act = utcnow()
        elif isinstance(step, Approve | Deny):
            self.decide(step)
        elif isinstance(step, ByHand):
            now = utcnow()
            change = faults.cordon if step.kubectl == "cordon" else faults.uncordon
            change(self.cluster, step.node, now)
            self.played.append(Played(now, "kubectl", step.kubectl, step.node))
            self.last_act = now
        elif isinstance(step, Create):
            self.create(step.create)
            self.last_act = utcnow()
        elif isinstance(step, Wait):
            time.sleep(step.wait)
        elif isinstance(step, WaitFor):
            self.wait_for(step)

    def create(self, manifest: dict[str, Any]) -> None:
        """POST the object to the simulated API server as its admin, over its TLS, as
        `kubectl create -f` does."""
        kind = str(manifest["kind"])
        resource = BY_KIND.get(kind)
        if resource is None:
            raise GpubotError(f"create: the simulated cluster serves no {kind}")
        namespace = str(manifest["metadata"].get("namespace") or "default")
        prefix = f"/apis/{resource.api_version}" if resource.group else "/api/v1"
        scope = f"/namespaces/{namespace}" if resource.namespaced else ""
        api = self.world.simulation.api
        request = urllib.request.Request(
            f"{api.address}{prefix}{scope}/{resource.plural}",
            data=json.dumps({"apiVersion": resource.api_version, **manifest}).encode(),
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {api.admin_token}",
            },
            method="POST",
        )
        context = api.credentials.client_context()
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as answer:
                answer.read()
        except urllib.error.HTTPError as refused:
            detail = refused.read().decode(errors="replace")[:300]
            raise GpubotError(f"create {kind}: {refused.code} {detail}") from refused

    def open_request(self, action: Any, node: str) -> ActionRequest | None:
        store = self.world.replica.store
        now = utcnow()
        found = [
            r
            for incident in store.incidents(node=node)
            if incident.state is not IncidentState.RESOLVED
            for r in store.requests(incident.id)
            if r.action is action and r.expires_at > now and store.execution(r.id) is None
        ]
        return max(found, key=lambda r: r.created_at, default=None)

    def decide(self, step: Approve | Deny) -> None:
        decision = step.approve if isinstance(step, Approve) else step.deny
        deadline = time.monotonic() + REQUEST_WAIT_S
        request = self.open_request(decision.action, decision.node)
        while request is None and time.monotonic() < deadline:
            time.sleep(0.2)
            request = self.open_request(decision.action, decision.node)
        if request is None:
            raise GpubotError(
                f"no {decision.action.value} request on {decision.node} to "
                f"{'approve' if isinstance(step, Approve) else 'deny'} "
                f"within {REQUEST_WAIT_S:g} s"
            )
        service = self.world.replica.service
        who = decision.as_
        found = request

        def act() -> None:
            # A click returns at once in Slack; here the approval runs the action itself,
            # which may take as long as the drain: the script goes on meanwhile.
            if isinstance(step, Approve):
                outcome = service.approve(found.id, who)
            else:
                outcome = service.deny(found.id, who)
            with self._lock:
                self.told.append(
                    Told(utcnow(), found.action, found.node, outcome.status, outcome.message)
                )

        thread = threading.Thread(target=act, name=f"decide-{request.id}", daemon=True)
        self.deciding.append(thread)
        self.last_act = utcnow()
        thread.start()
        time.sleep(0.2)  # a person's click and the next one are not simultaneous

    def record(self) -> Record:
        store = self.world.replica.store
        ended = utcnow()
        incidents = [
            i for i in store.incidents() if i.cluster == self.world.replica.settings.cluster
        ]
        offers = []
        for incident in incidents:
            for request in store.requests(incident.id):
                execution = store.execution(request.id)
                until = execution.started_at if execution is not None else None
                if until is None and request.expires_at < ended:
                    until = request.expires_at
                offers.append(Offer(request, until))
        with self._lock:
            told = list(self.told)
        return Record(
            started=self.started,
            ended=ended,
            first_fault=self.first_fault,
            seen=self.world.chat.shown(),
            told=told,
            incidents=incidents,
            timelines={i.id: store.timeline(i.id) for i in incidents},
            offers=offers,
            digest=[],
            errors=list(self.errors),
            played=list(self.played),
        )

    def wait_for(self, step: WaitFor) -> None:
        deadline = time.monotonic() + step.within
        since = self.last_act
        while time.monotonic() < deadline:
            if any(e.at >= since and matches(step.wait_for, e) for e in events(self.record())):
                return
            time.sleep(0.25)
        raise GpubotError(f"waited {step.within:g} s for: {step.wait_for.describe()}")


def find_prometheus(choice: str) -> str | None:
    """`auto`: the `prometheus` on PATH, if any; `off`: none; otherwise a path to it."""
    if choice == "off":
        return None
    if choice == "auto":
        return shutil.which("prometheus")
    if shutil.which(choice) is None:
        raise GpubotError(f"--prometheus {choice}: no such program")
    return choice


def play_drill(
    drill: Drill,
    base: Settings,
    *,
    real_time: bool = False,
    prometheus_bin: str | None = None,
    show: Console | None = None,
) -> Record:
    """Plays one drill in a world of its own: everything the judge (or a soak's figures)
    reads."""
    quiet = Console(file=io.StringIO(), width=120)
    with tempfile.TemporaryDirectory(prefix=f"gpubot-drill-{drill.drill}-") as workdir:
        world = _start(
            drill,
            base,
            Path(workdir),
            show or quiet,
            real_time=real_time,
            prometheus_bin=prometheus_bin,
        )
        script = _Script(drill, world)
        try:
            script.play()
            for thread in script.deciding:
                thread.join(timeout=world.replica.settings.remediation.drain_timeout_s)
            digest = world.replica.service.post_digest() if drill.expect.digest else []
            return dataclasses.replace(script.record(), digest=digest)
        finally:
            script.alerts.stop()
            world.stop()


def run_drill(
    drill: Drill,
    base: Settings,
    *,
    real_time: bool = False,
    prometheus_bin: str | None = None,
    show: Console | None = None,
) -> Verdict:
    """Plays one drill and judges it."""
    record = play_drill(drill, base, real_time=real_time, prometheus_bin=prometheus_bin, show=show)
    return judge(drill, record)


def load_drills(paths: list[Path]) -> list[Drill]:
    """Every drill named, each file checked whole before any runs."""
    return [load_drill(f) for p in paths for f in drill_files(p)]


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} s"


def table(verdicts: list[Verdict]) -> Table:
    """The drills side by side: what an operator reads before deploying their settings."""
    shown = Table(title="gpubot drill")
    for column in (
        "drill",
        "checks",
        "to the right diagnosis",
        "messages",
        "wrong-proposal window",
        "reopens",
        "",
    ):
        shown.add_column(column, justify="left" if column == "drill" else "right")
    for v in verdicts:
        passed = sum(1 for c in v.checks if c.passed)
        shown.add_row(
            v.drill,
            f"{passed}/{len(v.checks)}",
            _seconds(v.time_to_right_s),
            str(v.messages),
            _seconds(v.wrong_window_s),
            str(v.reopened),
            "pass" if v.passed else "FAIL",
        )
    return shown
