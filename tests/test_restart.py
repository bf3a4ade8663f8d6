"""Restart safety (issue 6, DESIGN.md invariants 3 and 8) with real processes: `gpubot serve`
runs as a subprocess against the simulated cluster (served from this test process, so every
eviction request is counted in `Store.evictions`) and a SQLite store file, and is killed with
SIGKILL — mid-drain, and with an approval pending. After a restart on the same store every
pod has been evicted exactly once, the timeline tells the whole story, the pending request
kept its expiry, and a further restart repeats nothing.

How the kill lands mid-drain, every time: each pod that has to leave carries a finalizer
(`HOLD`: a controller that flushes a pod's logs before letting it go), so an evicted pod
stays Terminating until the test — playing that controller — releases it. The drain evicts
at most 32 pods at once (32 workers, each evicting one pod and then waiting for it to be
gone) and the node has more than that, so when the first eviction shows, the process is
killed with some pods evicted and Terminating and the others not yet asked. The test
releases the pods only once the restarted replica's drain is seen waiting for one of the
pods evicted before the kill (`HoldingStore.pod_reads`): so the resumed drain must take
those as "already going" and evict only the others. Evicting one again would show as a
duplicate in `Store.evictions`.

The helpers here (`Gpubot`, `running_gpubot`, `wait_for`, ...) are also used by
`tests/test_replicas.py`.
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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
import yaml
from typer.testing import CliRunner

from bot.app import load_ruleset
from bot.cli import app
from bot.config import load_settings
from bot.diagnose import diagnose
from bot.evidence.live import read_snapshot
from bot.evidence.snapshot import collect_facts
from bot.kubeobjects import controller_of, name_of, namespace_of
from bot.model import Action, ActionRequest, IncidentState
from bot.remediate.executor import Executor
from bot.sim import faults, objects
from bot.sim.apiserver import SimulatedApiServer
from bot.sim.scenarios import healthy_cluster
from bot.sim.store import BY_KIND, Json, ResourceType, Store
from bot.sources.alertmanager import signals_from_payload, validate_payload
from bot.store.sql import ExecutionRecord, SqlStore
from bot.store.tables import executions

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


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUBOT_")}
    env["GPUBOT_SERVE__BEARER_TOKEN"] = TOKEN
    return env


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

    def serve(self, identity: str, *, watch: bool = False) -> Serve:
        """Starts a replica; `Serve.wait_listening` waits for it."""
        n = len(self.started)
        out, err = self.tmp_path / f"serve-{n}-{identity}.out", self.tmp_path / f"serve-{n}.err"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bot.cli",
                    "serve",
                    "--config",
                    str(self.config),
                    "--port",
                    "0",
                    "--kube-url",
                    self.kube_url,
                    "--store-url",
                    self.store_url,
                    "--identity",
                    identity,
                    "--watch" if watch else "--no-watch",
                ],
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                env=_env(),
            )
        served = Serve(identity, process, out, err)
        self.started.append(served)
        return served

    def start(self, identity: str, *, watch: bool = False) -> Serve:
        served = self.serve(identity, watch=watch)
        served.wait_listening()
        return served

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "bot.cli", *args, "--store-url", self.store_url]
        command += ["--config", str(self.config)]
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=60,
            env=_env(),
            stdin=subprocess.DEVNULL,
        )

    def approve(self, request_id: str, user: str = "alice") -> str:
        done = self.cli("approve", request_id, "--as", user)
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
def simulator(store: Store) -> Iterator[SimulatedApiServer]:
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


def xid_alert(store: Store, node: str) -> dict[str, Any]:
    """A GPU falls off the bus on `node`: the cluster changes, and Prometheus' alert."""
    return faults.inject(store, "xid", node, datetime.now(UTC), code=79, gpu=3).payload()


def evictable_pods(store: Store, node: str) -> set[Pod]:
    """The pods a drain of `node` must move: all but its DaemonSet pods."""
    pods, _ = store.list(BY_KIND["Pod"], "", field_selector=f"spec.nodeName={node}")
    return {
        (namespace_of(p), name_of(p))
        for p in pods
        if (controller_of(p) or ("", ""))[0] != "DaemonSet"
    }


class HoldingStore(Store):
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


def cluster(held_pods: int = 0) -> HoldingStore:
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
    store = HoldingStore()
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


# ---- the tests ------------------------------------------------------------------------------


def test_sigkill_mid_drain_then_restart_evicts_every_pod_exactly_once(tmp_path: Path) -> None:
    sim_store = cluster(held_pods=HELD_PODS)
    must_leave = evictable_pods(sim_store, NODE)
    assert len(must_leave) == HELD_PODS + 2  # the batch pods, a training worker, an agent
    url = f"sqlite:///{tmp_path / 'gpubot.db'}"
    with simulator(sim_store) as server, running_gpubot(tmp_path, server.url, url) as bot:
        store = SqlStore.open(url)
        try:
            first = bot.start("gpubot-0")
            status, answer = post_alert(first, xid_alert(sim_store, NODE))
            assert (status, answer["accepted"]) == (200, 1), answer
            drain = wait_for("the drain request", lambda: the_request(store, NODE), 30, bot)
            assert store.votes(drain.id) == []

            bot.approve(drain.id)
            wait_for("the first eviction", lambda: sim_store.evictions, 30, bot)
            first.kill()
            reads_at_kill = len(sim_store.pod_reads)
            gone_before = set(sim_store.evictions)
            assert 0 < len(gone_before) < len(must_leave), (
                f"the kill did not land mid-drain: {len(gone_before)} of {len(must_leave)} evicted"
            )
            claimed = store.execution(drain.id)
            assert claimed is not None and claimed.finished_at is None, claimed
            assert claimed.executor == "gpubot-0"

            # A new replica (another name: it waits out the dead one's lease) resumes the
            # drain. Once it waits for a pod evicted before the kill, the pods may go.
            second = bot.start("gpubot-1")
            wait_for(
                "the resumed drain to wait for a pod evicted before the kill",
                lambda: gone_before & set(sim_store.pod_reads[reads_at_kill:]),
                30,
                bot,
            )
            sim_store.release(NODE)
            done = wait_for(
                "the resumed drain to finish",
                lambda: finished(store, drain.id),
                30,
                bot,
            )
            assert done.outcome == "succeeded", done
            assert done.executor == "gpubot-1"  # taken over from the dead one's claim
            assert execution_count(store) == 1

            # Invariant 3: no pod was asked to leave twice, and every one that had to, left.
            evicted = list(sim_store.evictions)
            assert len(evicted) == len(set(evicted)), sorted(
                p for p in set(evicted) if evicted.count(p) > 1
            )
            assert set(evicted) == must_leave
            assert sim_store.direct_deletes == []
            assert evictable_pods(sim_store, NODE) == set()
            node = sim_store.get(BY_KIND["Node"], "", NODE)
            assert node["spec"]["unschedulable"] is True

            # The timeline, as the CLI prints it, tells the whole story in order.
            [told] = [t for t in bot.timeline(NODE) if t["incident"]["rule"] == "gpu-fell-off-bus"]
            entries = told["timeline"]
            kinds_in_order(
                entries,
                [
                    ("diagnosis", "GPU fell off the bus"),
                    ("proposal", f"kubectl drain {NODE}"),
                    ("approval", "alice approved"),
                    ("action-start", f"kubectl drain {NODE}"),
                    ("note", "after a restart"),
                    ("action-result", f"drained {NODE}"),
                ],
            )
            mine = [e for e in entries if (e.get("data") or {}).get("request") == drain.id]
            assert [e["kind"] for e in mine].count("action-start") == 1
            assert [e["kind"] for e in mine].count("action-result") == 1
            [resumed] = [e for e in mine if "after a restart" in e["text"]]
            assert "by gpubot-0" in resumed["text"], resumed
            [result] = [e for e in mine if e["kind"] == "action-result"]
            assert result["data"]["outcome"] == "succeeded"
            # The message accounts for every pod: evicted now, or already leaving at the kill.
            evicted_now = len(must_leave) - len(gone_before)
            assert (
                f"evicted {evicted_now} pods, {len(gone_before)} already leaving" in result["text"]
            ), result["text"]

            # A second restart repeats nothing. An approval recorded while no replica runs
            # (a drain of gpu-a3) shows the new leader's duties ran: they resume before they
            # pick up approvals, and the blast radius refuses gpu-a3 while NODE is out.
            status, _ = post_alert(second, xid_alert(sim_store, "gpu-a3"))
            assert status == 200
            other = wait_for("gpu-a3's drain request", lambda: the_request(store, "gpu-a3"), 30)
            second.kill()
            timeline_before = [(e.kind, e.text) for e in store.timeline(told["incident"]["id"])]
            evictions_before = list(sim_store.evictions)
            bot.approve(other.id)
            bot.start("gpubot-1")
            judged = wait_for(
                "the approved gpu-a3 drain to be judged",
                lambda: finished(store, other.id),
                30,
                bot,
            )
            assert judged.outcome == "refused" and "blast radius" in judged.detail, judged
            assert sim_store.evictions == evictions_before
            assert store.execution(drain.id) == done
            assert store.unfinished_executions() == []
            timeline_after = [(e.kind, e.text) for e in store.timeline(told["incident"]["id"])]
            assert timeline_after == timeline_before
        finally:
            store.close()


def test_a_pending_approval_survives_sigkill_with_its_expiry_and_approving_then_works(
    tmp_path: Path,
) -> None:
    sim_store = cluster()
    must_leave = evictable_pods(sim_store, NODE)
    url = f"sqlite:///{tmp_path / 'gpubot.db'}"
    with simulator(sim_store) as server, running_gpubot(tmp_path, server.url, url) as bot:
        store = SqlStore.open(url)
        try:
            first = bot.start("gpubot-0")
            assert post_alert(first, xid_alert(sim_store, NODE))[0] == 200
            drain = wait_for("the drain request", lambda: the_request(store, NODE), 30, bot)
            assert drain.incident is not None
            waiting = wait_for(
                "the incident to await approval",
                lambda: (
                    store.incident(drain.incident or "").state is IncidentState.AWAITING_APPROVAL
                ),
                10,
                bot,
            )
            assert waiting
            first.kill()

            # The same replica comes back (a container restart keeps its name).
            bot.start("gpubot-0")
            kept = store.request(drain.id)
            assert kept == drain  # same id, node, facts seen ... and the same expiry
            assert kept.expires_at > datetime.now(UTC) + timedelta(minutes=20)
            [proposal] = [
                e for e in store.timeline(drain.incident) if e.data.get("request") == drain.id
            ]
            assert proposal.kind == "proposal"
            assert proposal.data["expires_at"] == drain.expires_at.isoformat()
            assert store.incident(drain.incident).state is IncidentState.AWAITING_APPROVAL
            assert store.execution(drain.id) is None and sim_store.evictions == []

            bot.approve(drain.id)
            done = wait_for(
                "the approved drain to finish",
                lambda: finished(store, drain.id),
                30,
                bot,
            )
            assert done.outcome == "succeeded", done
            assert sorted(sim_store.evictions) == sorted(must_leave)
            assert sim_store.direct_deletes == []
            kinds = [e.kind for e in store.timeline(drain.incident)]
            assert "note" not in kinds[kinds.index("approval") :]  # nothing was resumed
            assert kinds.count("action-start") == kinds.count("action-result") == 1
        finally:
            store.close()


def test_an_approval_from_the_cli_moves_the_incident_through_its_states(
    sim_cluster: Any, tmp_path: Path
) -> None:
    """What the tests above leave out: the incident's states. An approval from `gpubot
    approve` is picked up by the leader (as after a restart); the incident must then go
    awaiting approval → approved → executing → succeeded like a click's."""
    server, kube = sim_cluster
    config = write_settings(tmp_path / "settings.yaml")
    settings = load_settings(config)
    url = f"sqlite:///{tmp_path / 'gpubot.db'}"
    store = SqlStore.open(url)
    try:
        now = datetime.now(UTC)
        payload = faults.inject(server.store, "xid", NODE, now, code=79, gpu=3).payload()
        signals = signals_from_payload(validate_payload(payload), ["node"])
        facts = collect_facts(read_snapshot(kube), signals, settings, now)
        diagnoses = diagnose(facts, signals, load_ruleset(settings), settings).diagnoses
        [found] = [d for d in diagnoses if d.node == NODE]
        incident, _ = store.record_diagnosis("default", found, now, 3600)
        executor = Executor(
            kube, store, settings, executor_id="leader", clock=lambda: datetime.now(UTC)
        )
        [request] = executor.propose(incident.id, found, facts)
        assert store.incident(incident.id).state is IncidentState.AWAITING_APPROVAL

        result = CliRunner().invoke(
            app,
            ["approve", request.id, "--as", "alice", "--store-url", url, "--config", str(config)],
        )
        assert result.exit_code == 0, result.output
        [outcome] = executor.execute_approved()
        assert outcome.status == "acted", outcome
        states = [e.data.get("to") for e in store.timeline(incident.id) if e.kind == "state"]
        assert states[-3:] == ["approved", "executing", "succeeded"], states
        assert store.incident(incident.id).state is IncidentState.SUCCEEDED
    finally:
        store.close()
