"""One drill's world: a simulated cluster (gpusim's API server, scheduler, kubelet and
controllers behind the real kubernetes client), a real Prometheus scraping its dcgm-exporters
when one is installed, a fresh SQLite store, and one replica composed exactly as `gpubot
serve` composes it (`serve.build_replica`), with a chat that records what it shows.

Why it exists: a drill is only worth its verdict if the bot it rehearses is the real one. The
world is built once per drill, on the operator's settings at the drill's time scale, and
torn down whole; how it is built is apart from what the script then plays in it.

What it must never do: reach anything but 127.0.0.1, or share anything with a real
deployment (its store, webhook token and lease are its own).
"""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from bot.chat.console import ConsoleChat
from bot.clock import utcnow
from bot.config import Settings
from bot.drills.record import RecordingChat
from bot.drills.spec import Drill
from bot.errors import GpubotError
from bot.roots import serve
from gpusim import faults
from gpusim.launching import Simulation, start_simulator

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


class _Prometheus:
    """A real Prometheus scraping the simulated dcgm-exporters every second: the evidence
    `serve` reads (the health gate's Xid window) comes the way it does in a cluster. Owns the
    process; it must never outlive its drill (`stop`)."""

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
class World:
    """One drill's simulated cluster and serving replica. Owns the simulator, the replica's
    thread and the Prometheus process, and stops them together; it must never be reached
    but on 127.0.0.1 (the webhook, the simulated API server)."""

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


def start_world(
    drill: Drill,
    base: Settings,
    workdir: Path,
    show: Console,
    *,
    real_time: bool,
    prometheus_bin: str | None,
) -> World:
    """The world of `drill`, ready: the webhook listening, the lease held, the watches
    synced. Whatever started is stopped again when a later part fails."""
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
    return World(simulation, replica, chat, bound[0], token, thread, prometheus)
