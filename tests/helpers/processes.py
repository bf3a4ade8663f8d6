"""`gpubot serve` as a subprocess against a simulated cluster served from the test process
(so every eviction is counted), with SIGKILL and restart: the helpers the restart, replica
and inbox tests share. Pods that must leave a node carry a finalizer (`HOLD`) that the test
releases, so a kill lands mid-drain every time.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
import yaml

from bot.kube_objects import controller_of, name_of, namespace_of
from bot.model import Action, ActionRequest
from bot.store.sql import ExecutionRecord, SqlStore
from bot.store.tables import executions
from gpusim import faults, objects
from gpusim.apiserver import SimulatedApiServer
from gpusim.objects import Json
from gpusim.resources import BY_KIND, ResourceType
from gpusim.scenarios import healthy_cluster
from gpusim.state import ClusterState

TOKEN = "restart-test-token"
NODE = "gpu-a2"
HELD_PODS = 40
"""Pods added to NODE: with its two, more than the drain's 32 evictions at once."""
HOLD = "example.com/flush-logs"
START_TIMEOUT_S = 60.0
T = TypeVar("T")
Pod = tuple[str, str]


# ---- helpers (shared with tests/test_replicas.py) -------------------------------------------


def wait_for(what: str, check: Callable[[], T | None], timeout_s: float, logs: Any = None) -> T:
    """Poll `check` until it returns something truthy; past the deadline, fail saying what
    was awaited (with the serve logs, when given a `Gpubot`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            tail = f"\n{logs.logs()}" if logs is not None else ""
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}{tail}")
        time.sleep(0.02)


def write_settings(path: Path) -> Path:
    """One person (alice) may approve cordon, drain and uncordon; the leader's duties every
    0.5 s; a 3 s lease renewed every 0.5 s; listen on loopback only."""
    one_person = {"users": ["alice"], "two_person": False}
    settings = {
        "remediation": {
            "approvals": {"cordon": one_person, "drain": one_person, "uncordon": one_person},
            # A dead replica's action is taken over 3 s after its last heartbeat.
            "execution_stale_s": 3,
        },
        "schedule": {"leader_duties_s": 0.5},
        "serve": {
            "host": "127.0.0.1",
            "lease_duration_s": 3,
            "renew_deadline_s": 2,
            "retry_period_s": 0.5,
        },
    }
    path.write_text(yaml.safe_dump(settings))
    return path


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUBOT_")}
    env["GPUBOT_SERVE__BEARER_TOKEN"] = TOKEN
    env.update(extra or {})
    return env


def in_cluster(server: SimulatedApiServer, namespace: str, name: str) -> dict[str, str]:
    """The environment of a pod running as the ServiceAccount namespace/name on the simulated
    cluster: the API's host and port, and (instead of the kubelet's mount at
    /var/run/secrets/kubernetes.io/serviceaccount) the account's projected token volume."""
    return {
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(server.port),
        "GPUBOT_SERVICEACCOUNT_DIR": str(server.service_account_dir(namespace, name)),
    }


@dataclass
class Serve:
    """One `gpubot serve` process; stdout and stderr go to files (a full pipe would block
    it: the console chat prints every diagnosis)."""

    identity: str
    process: subprocess.Popen[bytes]
    out: Path
    err: Path
    port: int = 0

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def tail(self, lines: int = 25) -> str:
        parts = []
        for path in (self.err, self.out):
            text = path.read_text(errors="replace") if path.exists() else ""
            parts.append(f"--- {path.name} (last {lines} lines) ---")
            parts.extend(text.splitlines()[-lines:])
        return "\n".join(parts)

    def wait_listening(self, timeout_s: float = START_TIMEOUT_S) -> int:
        def bound() -> int | None:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"gpubot serve {self.identity} exited with {self.process.returncode} "
                    f"before listening\n{self.tail()}"
                )
            found = re.search(r"gpubot serve: listening on (\d+)", self.out.read_text())
            return int(found.group(1)) if found else None

        deadline = time.monotonic() + timeout_s
        while (port := bound()) is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"gpubot serve {self.identity} did not listen\n{self.tail()}")
            time.sleep(0.05)
        self.port = port
        return port

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, no lease is released, nothing is flushed."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)


@dataclass
class Gpubot:
    """`gpubot serve` processes and CLI calls on one store and one simulated cluster."""

    tmp_path: Path
    config: Path
    kube_url: str
    store_url: str
    started: list[Serve] = field(default_factory=list)

    def serve(
        self, identity: str, *, watch: bool = False, env: dict[str, str] | None = None
    ) -> Serve:
        """Starts a replica; `Serve.wait_listening` waits for it. With `env` naming
        KUBERNETES_SERVICE_HOST (see `in_cluster`), it runs `--in-cluster` instead of
        `--kube-url`."""
        n = len(self.started)
        out, err = self.tmp_path / f"serve-{n}-{identity}.out", self.tmp_path / f"serve-{n}.err"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bot.commands",
                    "serve",
                    "--config",
                    str(self.config),
                    "--port",
                    "0",
                    *(
                        ["--in-cluster"]
                        if env and "KUBERNETES_SERVICE_HOST" in env
                        else ["--kube-url", self.kube_url]
                    ),
                    "--store-url",
                    self.store_url,
                    "--identity",
                    identity,
                    "--watch" if watch else "--no-watch",
                ],
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                env=_env(env),
            )
        served = Serve(identity, process, out, err)
        self.started.append(served)
        return served

    def start(
        self, identity: str, *, watch: bool = False, env: dict[str, str] | None = None
    ) -> Serve:
        served = self.serve(identity, watch=watch, env=env)
        served.wait_listening()
        return served

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "bot.commands", *args, "--store-url", self.store_url]
        command += ["--config", str(self.config)]
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=60,
            env=_env(),
            stdin=subprocess.DEVNULL,
        )

    def approve(self, request_id: str, user: str = "alice", wait_s: float = 0) -> str:
        """`gpubot approve`; by default returning once the vote is stored (the tests that
        kill a leader mid-drain decide themselves when to look)."""
        done = self.cli("approve", request_id, "--as", user, "--wait", str(wait_s))
        assert done.returncode == 0, f"gpubot approve failed: {done.stderr}\n{self.logs()}"
        return done.stdout

    def timeline(self, node: str) -> list[dict[str, Any]]:
        """`gpubot timeline NODE --format json`: one JSON document per incident."""
        done = self.cli("timeline", node, "--format", "json")
        assert done.returncode == 0, f"gpubot timeline failed: {done.stderr}"
        return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]

    def logs(self) -> str:
        return "\n".join(
            f"=== gpubot serve {s.identity} (pid {s.pid}, exit {s.process.poll()}) ===\n{s.tail()}"
            for s in self.started
        )

    def close(self) -> None:
        for served in self.started:
            served.kill()


@contextmanager
def running_gpubot(
    tmp_path: Path, kube_url: str, store_url: str, config: Path | None = None
) -> Iterator[Gpubot]:
    """Every process started is SIGKILLed on the way out; on a failure the tails of their
    logs are printed (pytest shows them with the failure)."""
    bot = Gpubot(
        tmp_path, config or write_settings(tmp_path / "settings.yaml"), kube_url, store_url
    )
    try:
        yield bot
    except BaseException:
        print(bot.logs())
        raise
    finally:
        bot.close()


@contextmanager
def simulator(store: ClusterState) -> Iterator[SimulatedApiServer]:
    server = SimulatedApiServer(store).start()
    try:
        yield server
    finally:
        server.stop()


def post_alert(served: Serve, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"{served.url}/alertmanager",
        data=json.dumps(payload).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def xid_alert(store: ClusterState, node: str) -> dict[str, Any]:
    """A GPU falls off the bus on `node`: the cluster changes, and Prometheus' alert."""
    return faults.inject(store, "xid", node, datetime.now(UTC), code=79, gpu=3).payload()


def evictable_pods(store: ClusterState, node: str) -> set[Pod]:
    """The pods a drain of `node` must move: all but its DaemonSet pods."""
    pods, _ = store.list(BY_KIND["Pod"], "", field_selector=f"spec.nodeName={node}")
    return {
        (namespace_of(p), name_of(p))
        for p in pods
        if (controller_of(p) or ("", ""))[0] != "DaemonSet"
    }


class HoldingClusterState(ClusterState):
    """The simulator's state, noting every pod read by name: a drain waiting for a pod to be
    gone polls it, so a read of an evicted pod shows who is waiting for it."""

    def __init__(self) -> None:
        super().__init__()
        self.pod_reads: list[Pod] = []

    def get(self, resource: ResourceType, namespace: str, name: str) -> Json:
        if resource.kind == "Pod":
            self.pod_reads.append((namespace, name))
        return super().get(resource, namespace, name)

    def release(self, node: str) -> None:
        """The controller behind HOLD is done with every pod of `node`: evicted ones go."""
        pods, _ = self.list(BY_KIND["Pod"], "", field_selector=f"spec.nodeName={node}")
        for pod in pods:
            if HOLD in (pod["metadata"].get("finalizers") or []):
                self.patch(
                    BY_KIND["Pod"],
                    namespace_of(pod),
                    name_of(pod),
                    "application/merge-patch+json",
                    {"metadata": {"finalizers": None}},
                )


def cluster(held_pods: int = 0) -> HoldingClusterState:
    """Four GPU nodes. With `held_pods`, NODE also runs that many ReplicaSet pods, and every
    pod that a drain of NODE must move carries the HOLD finalizer."""
    now = datetime.now(UTC)
    items = healthy_cluster(4, now)["items"]
    for index in range(held_pods):
        items.append(
            objects.pod(
                f"batch-{index:02d}",
                "batch",
                NODE,
                now,
                labels={"app": "batch"},
                owner_ref=objects.owner("ReplicaSet", "batch-5d8f7"),
                generate_name="batch-5d8f7-",
                host_ip=objects.node_ip(NODE),
            )
        )
    store = HoldingClusterState()
    store.load(items)
    if held_pods:
        for namespace, name in evictable_pods(store, NODE):
            store.patch(
                BY_KIND["Pod"],
                namespace,
                name,
                "application/merge-patch+json",
                {"metadata": {"finalizers": [HOLD]}},
            )
    return store


def the_request(store: SqlStore, node: str, action: Action = Action.DRAIN) -> ActionRequest | None:
    """The one `action` request of the node's one incident, once it exists."""
    found = [r for i in store.incidents(node=node) for r in store.requests(i.id)]
    wanted = [r for r in found if r.action is action]
    assert len(wanted) <= 1, f"more than one {action.value} request for {node}: {wanted}"
    return wanted[0] if wanted else None


def finished(store: SqlStore, request_id: str) -> ExecutionRecord | None:
    """The request's execution, once it has finished."""
    done = store.execution(request_id)
    return done if done is not None and done.finished_at is not None else None


def execution_count(store: SqlStore) -> int:
    with store.engine.connect() as connection:
        return int(connection.scalar(sa.select(sa.func.count()).select_from(executions)) or 0)


def kinds_in_order(entries: list[dict[str, Any]], wanted: list[tuple[str, str]]) -> list[int]:
    """Indexes of the first entry of each (kind, text fragment), each after the previous."""
    found, start = [], 0
    for kind, fragment in wanted:
        index = next(
            (
                i
                for i in range(start, len(entries))
                if entries[i]["kind"] == kind and fragment in entries[i]["text"]
            ),
            None,
        )
        assert index is not None, (
            f"no {kind} entry with {fragment!r} after entry {start}; the timeline is:\n"
            + "\n".join(f"  {e['kind']:15} {e['actor']:8} {e['text'][:110]}" for e in entries)
        )
        found.append(index)
        start = index + 1
    return found
