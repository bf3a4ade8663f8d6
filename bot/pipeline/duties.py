"""What only the leader does, on the scheduler's ticks: run approved actions (also those
recorded on other replicas) and resume those a dead process left, expire unanswered
proposals, sweep the whole cluster, watch drains, post the daily digest.

Why it exists: every replica diagnoses and takes clicks, but acting twice would be worse than
acting late, so acting is the one Lease holder's job (the store's once-only execution row
guards any overlap during a handover).

What it must never do: run on a follower, hold the scheduler's thread for the length of a
drain, or hand one action to two threads.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from bot.acting.wing import DecisionWing
from bot.approval.blast_radius import out_of_service
from bot.clock import Clock
from bot.config import Settings
from bot.errors import GpubotError, StateChanged
from bot.facts.collecting import collect_facts
from bot.facts.live import read_snapshot
from bot.gate.items import failing_text
from bot.incidents.digest import OutOfService, build_digest, digest_lines, still_out_note
from bot.incidents.lifecycle import IllegalTransition
from bot.kube_objects import name_of, spec_of
from bot.model import Incident, IncidentState, Outcome
from bot.names import GPUBOT
from bot.pipeline.passes import DiagnosisPass
from bot.pipeline.relay import DecisionRelay
from bot.pipeline.resolving import OPEN
from bot.ports import Chat, Cluster, Store
from bot.texts import say

log = logging.getLogger("gpubot.duties")

MAX_ACTIONS = 4
"""Actions the leader's duties run at once."""


class LeaderDuties:
    """Owns the set of actions handed to a thread of their own in this process (never one
    twice, at most `MAX_ACTIONS`)."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        cluster: Cluster,
        chat: Chat,
        wing: DecisionWing,
        clock: Clock,
        is_leader: Callable[[], bool],
        relay: DecisionRelay,
        passes: DiagnosisPass,
        on_delivery: Callable[[], None],
    ) -> None:
        self.settings = settings
        self.store = store
        self.cluster = cluster
        self.chat = chat
        self.executor = wing.executor
        self.proposals = wing.proposals
        self.clock = clock
        self.is_leader = is_leader
        self.relay = relay
        self.passes = passes
        self.on_delivery = on_delivery
        self._in_flight: set[str] = set()
        self._in_flight_lock = threading.Lock()
        self._absent_looked: dict[str, datetime] = {}
        """When a follow-up last ran a pass for an absent incident: one that stays open (its
        node gpubot took out is still out) is looked at again once per resolve window, not
        on every tick."""

    def run_in_background(self) -> None:
        """The scheduler's tick: each pending action on a worker of its own, so the tick
        returns at once and a drain of many minutes holds up neither the next tick nor an
        approved cordon elsewhere. The blast radius stays whole: the executor takes nodes
        out one at a time. An action already handed to a worker is not handed again."""
        if not self.is_leader():
            return
        for request_id in self.executor.pending():
            with self._in_flight_lock:
                if request_id in self._in_flight or len(self._in_flight) >= MAX_ACTIONS:
                    continue  # running already, or every worker busy: the next tick
                self._in_flight.add(request_id)
            # Daemon threads: stopping the process must not wait for a drain; its heartbeat
            # stops with it and the next leader takes the drain over.
            threading.Thread(
                target=self._duty, args=(request_id,), name=f"action-{request_id}", daemon=True
            ).start()

    def _duty(self, request_id: str) -> None:
        try:
            outcome = self.executor.run_pending(request_id)
            if outcome is not None:
                self.relay.tell(request_id, outcome)
        except Exception:
            log.exception("the leader's duty for request %s failed", request_id)
        finally:
            with self._in_flight_lock:
                self._in_flight.discard(request_id)

    def run(self) -> list[Outcome]:
        """Resume what a dead process left half done, and run approvals recorded on other
        replicas, on the caller's thread."""
        if not self.is_leader():
            return []
        outcomes = self.executor.resume()
        outcomes += self.executor.execute_approved()
        for outcome in outcomes:
            self.relay.tell(outcome.request_id, outcome)
        return outcomes

    def follow_up(self) -> None:
        """What time alone changes, within seconds: held proposals whose settle window
        passed, absent problems that stayed away long enough and messages whose revision
        waited for the pace (a pass about their nodes decides), requests refused for a
        reason that has cleared (offered again, new buttons), and repaired nodes gpubot
        took out (the health gate, then an uncordon or the items still blocking it)."""
        if not self.is_leader():
            return
        now = self.clock()
        after = timedelta(seconds=self.settings.thresholds.resolve_after_s)
        due: set[str | None] = set()
        open_now = self.store.incidents(states=OPEN)
        # Forget the incidents that are over: the memory follows the open ones.
        ids = {i.id for i in open_now}
        self._absent_looked = {k: v for k, v in self._absent_looked.items() if k in ids}
        for incident in open_now:
            if incident.cluster != self.settings.cluster:
                continue
            if incident.held_until is not None and incident.held_until <= now:
                due.add(incident.node)
            looked = self._absent_looked.get(incident.id)
            if (
                incident.absent_since is not None
                and now - incident.absent_since >= after
                and (looked is None or now - looked >= after)
            ):
                self._absent_looked[incident.id] = now
                due.add(incident.node)
            if incident.state is IncidentState.AWAITING_APPROVAL:
                self._reoffer(incident)
            elif incident.state is IncidentState.SUCCEEDED and incident.absent_since is not None:
                self._back_to_service(incident)
        # Messages with a change held back by the revision pace: the pass that revises them.
        due |= self.passes.told.due(now)
        if self.passes.due_at is not None and self.passes.due_at <= now:
            self.passes.due_at = None
            due.add(None)
        if due:
            nodes = frozenset(n for n in due if n)
            self.passes.run([], nodes=None if None in due else nodes)

    def _reoffer(self, incident: Incident) -> None:
        try:
            found = self.proposals.reoffer(incident.id)
        except GpubotError as exc:
            log.warning("incident %s: could not look at its waiting request: %s", incident.id, exc)
            return
        if found is not None:
            old, new, why = found
            self.chat.ask_again(self.store.incident(incident.id), old, new, why)

    def _back_to_service(self, incident: Incident) -> None:
        incident_id = incident.id
        diagnosis = self.store.diagnosis(incident.id)
        if diagnosis is None:
            return
        try:
            offered = self.proposals.back_to_service(incident.id, diagnosis)
        except GpubotError as exc:
            log.warning("incident %s: the health gate could not look: %s", incident.id, exc)
            return
        if offered is None:
            return
        requests, gate = offered
        incident = self.store.incident(incident_id)
        if gate.passed:
            note = say(self.settings.lang, "duty.repaired", node=gate.node)
            self.chat.revise_diagnosis(incident, diagnosis, requests, note)
            return
        blocking = failing_text(gate.failing, self.settings.lang)
        self.chat.post_thread(
            incident,
            say(self.settings.lang, "duty.repaired_failing", node=gate.node, blocking=blocking),
        )

    def expire_requests(self) -> list[Incident]:
        """Incidents waiting on requests that have all expired: say so, and stop waiting."""
        now = self.clock()
        expired = []
        for incident_id in self.store.incidents_waiting_in_vain(now):
            try:
                done = self.store.transition(
                    incident_id,
                    IncidentState.EXPIRED,
                    GPUBOT,
                    now,
                    say(self.settings.lang, "duty.expired"),
                )
            except (StateChanged, IllegalTransition):
                continue  # decided a moment ago: not expired after all
            self.chat.post_thread(done, say(self.settings.lang, "duty.expired_ask"))
            expired.append(done)
        return expired

    def sweep(self) -> list[Incident]:
        """The periodic pass over the whole cluster; deliveries left unsplit (a failed split)
        are taken up by the worker on the way."""
        self.on_delivery()
        return self.passes.run([])

    def watch_drains(self) -> list[Incident]:
        """The drain watchdog: every cordoned node looked at again — its pods, what blocks
        them, how long it has been — so `drain-stuck` is raised while a drain is in progress,
        ours or a person's, without waiting for an alert or the next full sweep."""
        cordoned = frozenset(
            name_of(node)
            for node in self.cluster.list("Node")
            if spec_of(node).get("unschedulable")
        )
        if not cordoned:
            return []
        return self.passes.run([], nodes=cordoned)

    def post_digest(self, window: timedelta = timedelta(days=1)) -> list[str]:
        """The daily digest to the channel, in the zone the on-call reads clocks in. Nodes
        out of service are those the blast radius counts now (cordoned by anyone, or not
        Ready), read from the cluster; when it cannot be read, the digest still goes out,
        with them as far as the timelines show, and says so."""
        zone = ZoneInfo(self.settings.schedule.digest_tz)
        now = self.clock()
        out: dict[str, OutOfService] | None
        try:
            facts = collect_facts(
                read_snapshot(self.cluster), self.store.firing_alerts(), self.settings, now
            )
        except GpubotError:
            log.warning("the digest could not read the cluster", exc_info=True)
            out = None
        else:
            out = {
                name: OutOfService.of(node, facts.observed_at)
                for name, node in facts.nodes.items()
                if out_of_service(node)
            }
        digest = build_digest(self.store, now.astimezone(zone), window, out_of_service=out)
        told = digest_lines(digest, self.settings.lang)
        note = still_out_note(digest, self.settings.lang)  # said only when not read
        told = [*told, note] if note else told
        self.chat.post_notice("\n".join(told), monospace=True)
        return told
