"""The drill's script played in its world: faults and repairs in the simulator, their
alerts sent to the webhook as Alertmanager sends them (after its group_wait), approvals and
denials by named people as a click would make them, `kubectl cordon` by hand, objects
created, waits; and the record the judge reads.

Why it exists: the verdict is on what the on-call would have seen, so the script must drive
the replica only through its edges (the webhook, the service's votes, the API server) and
keep what happened when, for the judge to set beside what was told.

What it must never do: reach into the replica's parts (only its edges), or judge (the
verdict is `bot.drills.judging`'s, on this record).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot.clock import utcnow
from bot.drills.judging import Offer, Played, Record, Told, events, matches
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
)
from bot.errors import GpubotError
from bot.model import ActionRequest, IncidentState
from bot.roots.drill_world import World
from gpusim import faults
from gpusim.resources import BY_KIND

REQUEST_WAIT_S = 30.0
"""How long a scripted approver waits for the buttons to show up before the step fails."""


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


@dataclass
class _Alerts:
    """Alertmanager's side of the drill: what fired, for which fault on which node, sent
    after its group_wait; resolved when the fault is repaired. Owns the alerts firing and
    the timers of sends to come; it must never send after the drill ends (`stop`)."""

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


class Script:
    """Plays a drill's steps against its world. Owns what the judge needs of the play: when
    it started and last acted, the first fault, each step played, what each decision was
    answered, the errors that stopped it, and the threads of decisions still acting. It must
    never decide for the replica: a vote goes through `Service.approve` / `Service.deny`."""

    def __init__(self, drill: Drill, world: World) -> None:
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
