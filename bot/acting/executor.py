"""The executor: an approval becomes an action here and nowhere else (docs/architecture.md,
invariants 1, 2, 3, 5, 6).

Order matters. The votes are judged again from the store (whoever calls), the execution is
claimed in the store (a uniqueness constraint: one execution per request, ever), and only
then is the node read again (`bot.acting.checking`): if what the approval saw changed,
nothing is done and a new request goes out; the blast radius (cordon, drain) or the health
gate (uncordon) may still refuse. In dry-run everything but the writes happens and the
timeline says what would have run. Past every check the row is marked `acting` and the node
is written (`bot.acting.performing`).

Why execute, resume and hand-over are one module: they are one protocol around one execution
row (`bot.acting.executions`): a process resumes what it claimed before a crash, takes over
what a process that stopped beating left, and gives way when another took its own; split
across modules, the reader of one step could no longer see what the others guarantee.

What it must never do: act without votes the policy accepts now, act twice for one request,
or write a result for an execution another process now owns.
"""

from __future__ import annotations

import threading
from contextlib import nullcontext
from datetime import timedelta

from bot.acting.checking import Checks, Cleared, Stop
from bot.acting.executions import Held, Ownership
from bot.acting.performing import NodeActions
from bot.approval.proposing import Proposals
from bot.approval.voting import Voting
from bot.clock import Clock
from bot.config import Settings
from bot.errors import GpubotError
from bot.incidents.timeline import Timeline, command_for
from bot.model import Action, ActionRequest, ExecutionOutcome, IncidentState, Outcome
from bot.names import GPUBOT
from bot.ports import Execution, Store
from bot.texts import say


class Executor:
    """Owns this process' executions (through `Ownership`: reserved, beating, given up when
    taken over). Never: proposes (the approval room does), judges a vote (the policy does), or
    holds a lock across a drain (only the read-check-cordon step is one at a time)."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        executor_id: str,
        clock: Clock,
        voting: Voting,
        proposals: Proposals,
        checks: Checks,
        actions: NodeActions,
        timeline: Timeline,
    ) -> None:
        self.store = store
        self.settings = settings
        self.executor_id = executor_id
        self.clock = clock
        self.voting = voting
        self.proposals = proposals
        self.checks = checks
        self.actions = actions
        self.timeline = timeline
        self.ownership = Ownership(
            store, executor_id, clock, settings.remediation.execution_stale_s
        )
        # Invariant 6 across threads: two approvals at once must not both read a pool with
        # room for one node and both cordon. From the read to the cordon is one step.
        self._taking_out = threading.Lock()

    def _say(self, key: str, **values: object) -> str:
        return say(self.settings.lang, key, **values)

    def stop(self, wait_s: float = 5.0) -> None:
        """The process is stopping: nothing more is written to the cluster, every execution
        here is handed over to the next leader (and says so in its timeline), none starts."""
        self.ownership.stop(wait_s)

    # ---- executing an approved request ----------------------------------------------------

    def execute(self, request_id: str) -> Outcome:
        """An approved request run, whoever asks: whether it is still valid, unexpired and
        approved as the policy wants is judged here again from the store."""
        request = self.store.request(request_id)
        stale = self.voting.no_longer_valid(request)
        if stale is not None:
            return stale
        return self.carry_out(request, voted_here=False)

    def carry_out(self, request: ActionRequest, *, voted_here: bool) -> Outcome:
        """`voted_here`: the deciding vote was recorded a moment ago by
        `Voting.record_approval`, which found the request valid and moved its incident to
        approved; the claim still refuses it if its incident was resolved since."""
        now = self.clock()
        if now >= request.expires_at:
            return Outcome(
                request.id, "expired", self._say("exec.expired_at", at=request.expires_at)
            )
        approvers = self.voting.approvers_enough(request)
        if approvers is None:
            # Invariant 1: whoever calls this, the store must hold approvals that satisfy
            # the policy for exactly this request.
            return Outcome(request.id, "not-allowed", self._say("exec.no_approval"))
        if not self.ownership.reserve(request.id):
            return Outcome(request.id, "duplicate", self._say("exec.running_here"))
        with self.ownership.owning(request.id, None) as held:
            if not held.claim():
                # Resolved a moment ago (the claim looks at the incident in its transaction)?
                stale = self.voting.no_longer_valid(request)
                if stale is not None:
                    return stale
                done = self.store.execution(request.id)
                state = f" ({done.outcome})" if done else ""
                return Outcome(
                    request.id, "duplicate", self._say("exec.already_executed", state=state)
                )
            if not voted_here:
                # Approvals recorded elsewhere (an older CLI, a replica that died mid-click)
                # may have left the incident awaiting approval: the record must say it was
                # approved.
                approved = self._say("exec.state.approved", who=", ".join(approvers))
                self.timeline.move(request.incident, IncidentState.APPROVED, GPUBOT, approved)
            return self._checked_then_acted(held, request, approvers)

    def execute_approved(self) -> list[Outcome]:
        """Requests approved (on any replica) and not yet executed: the leader's pickup."""
        return [
            self.execute(request.id)
            for request in self.store.requests_to_execute(self.clock())
            if self.voting.approvers_enough(request) is not None
        ]

    def _checked_then_acted(
        self, held: Held, request: ActionRequest, approvers: list[str]
    ) -> Outcome:
        taking_out = request.action in (Action.CORDON, Action.DRAIN)
        with self._taking_out if taking_out else nullcontext():
            checked = self.checks.before_acting(request)
            if isinstance(checked, Stop):
                return self._stopped(held, request, checked)
            # Past every check: only from here may a crash be resumed without checking again.
            held.acting()
            cordoned = None
            if taking_out:
                # Cordon, taint and annotations in one patch on the node just read: with the
                # node list, two requests, as `kubectl cordon` sends.
                try:
                    if not held.may_write():
                        return self._gave_way(held, request)
                    cordoned = self.actions.take_out(request, approvers, checked.current)
                except GpubotError as exc:
                    self._started(request, approvers, checked)
                    return self._fail(held, request, self._failed(request, exc))
        self._started(request, approvers, checked)
        return self._acted(held, request, approvers, cordoned)

    def _started(self, request: ActionRequest, approvers: list[str], checked: Cleared) -> None:
        """The action's start in the record. For a cordon or drain it is written once the
        node is taken out, not before: the patch waits for no bookkeeping, and a crash in
        between resumes the execution (`acting`), which moves the incident on itself."""
        pods = None if request.action is Action.CORDON else checked.node.remaining_pods
        self.timeline.started(request, approvers, pods)

    def _acted(
        self,
        held: Held,
        request: ActionRequest,
        approvers: list[str],
        cordoned: bool | None,
        *,
        resumed: bool = False,
    ) -> Outcome:
        try:
            acted = self.actions.perform(request, approvers, cordoned, held)
        except GpubotError as exc:
            key = "exec.resume.failed" if resumed else "exec.failed"
            return self._fail(
                held, request, self._say(key, command=command_for(request), error=exc)
            )
        if held.lost:
            return self._gave_way(held, request)
        message = acted.text
        if resumed and acted.drained:
            message = self.actions.whole_drain(request, acted.drained) or message
        if not acted.done:
            return self._fail(held, request, message)
        self.timeline.move(request.incident, IncidentState.SUCCEEDED, GPUBOT, message)
        return self._finish(held, request, "succeeded", message)

    # ---- how an execution ends ------------------------------------------------------------

    def _finish(
        self, held: Held, request: ActionRequest, outcome: ExecutionOutcome, message: str
    ) -> Outcome:
        if not held.end(outcome, message):
            return self._gave_way(held, request)
        self.timeline.finished(request, outcome, message)
        return Outcome(request.id, outcome, message)

    def _failed(self, request: ActionRequest, error: GpubotError) -> str:
        return self._say("exec.failed", command=command_for(request), error=error)

    def _fail(self, held: Held, request: ActionRequest, message: str) -> Outcome:
        executing = self._say("exec.executing")
        self.timeline.move(request.incident, IncidentState.EXECUTING, GPUBOT, executing)
        self.timeline.move(request.incident, IncidentState.FAILED, GPUBOT, message)
        return self._finish(held, request, "failed", message)

    def _gave_way(self, held: Held, request: ActionRequest) -> Outcome:
        """This process gave the execution up: another owns it now (it tells the result), or
        this process is stopping and leaves it to the next leader at once. The timeline says
        which, and when."""
        command = command_for(request)
        if held.handing_over and held.hand_over():
            message = self._say("exec.handed_over", command=command, who=self.executor_id)
        else:
            message = self._say("exec.gave_way", command=command)
        self.timeline.note(request.incident, "note", message, request=request.id)
        return Outcome(request.id, "duplicate", message)

    def _stopped(self, held: Held, request: ActionRequest, stop: Stop) -> Outcome:
        if stop.kind == "unreadable":
            return self._fail(held, request, stop.why)
        if stop.kind == "gone":
            return self._finish(held, request, "refused", stop.why)
        if stop.kind == "dry-run":
            would = self._say("exec.dry_run", command=command_for(request))
            return self._finish(held, request, "dry-run", would)
        if stop.kind == "changed" and stop.node is not None:
            return self._ask_again(held, request, stop)
        return self._wait_for(held, request, stop)

    def _ask_again(self, held: Held, request: ActionRequest, stop: Stop) -> Outcome:
        """The node is not what the approval saw: this request is over, and a new one, on the
        node as it is now, asks again with its own buttons (invariant 2)."""
        assert stop.node is not None
        held.end("refused", self._say("exec.changed", changed=stop.why))
        asking = self._say("exec.state.asking_again")
        self.timeline.move(request.incident, IncidentState.AWAITING_APPROVAL, GPUBOT, asking)
        again = self.proposals.again(request, stop.node)
        message = self._say(
            "exec.changed_ask_again", node=request.node, changed=stop.why, id=again.id
        )
        self.timeline.note(request.incident, "note", message, request=request.id, again=again.id)
        return Outcome(request.id, "changed", message, new_request=again)

    def _wait_for(self, held: Held, request: ActionRequest, stop: Stop) -> Outcome:
        """Refused for a reason that can clear (the pool's budget, the health gate): this
        request is over, its incident waits again, and the proposals offer it anew, with new
        buttons, once the reason has cleared. Never a silent failure."""
        message = self._say("exec.waiting", why=stop.why)
        if not held.end("refused", message):
            return self._gave_way(held, request)
        waiting = self._say("exec.state.waiting", why=stop.why)
        self.timeline.move(request.incident, IncidentState.AWAITING_APPROVAL, GPUBOT, waiting)
        self.timeline.note(
            request.incident,
            "note",
            message,
            request=request.id,
            waiting=stop.kind,
            action=request.action.value,
            node=request.node,
        )
        return Outcome(request.id, "refused", message)

    # ---- after a restart, and on a leader change ------------------------------------------

    def resume(self) -> list[Outcome]:
        """Executions claimed but never finished (the process died mid-action): run them
        again. Every action is idempotent — a cordon twice is one cordon, and a drain evicts
        only pods still on the node — so resuming repeats no eviction of a gone pod."""
        outcomes = []
        for unfinished in self.store.unfinished_executions():
            outcome = self._resume(unfinished)
            if outcome is not None:
                outcomes.append(outcome)
        return outcomes

    def pending(self) -> list[str]:
        """What the leader's duties would run now, by request id: executions whose owner
        stopped beating (or that this process' earlier life left), then approvals recorded
        elsewhere and not yet executed. Each is run by `run_pending`."""
        now = self.clock()
        stale_before = now - timedelta(seconds=self.settings.remediation.execution_stale_s)
        running = self.ownership.running_here()
        ids = [
            u.request_id
            for u in self.store.unfinished_executions()
            if u.request_id not in running
            and (u.executor == self.executor_id or (u.heartbeat_at or u.started_at) < stale_before)
        ]
        ids += [
            r.id
            for r in self.store.requests_to_execute(now)
            if self.voting.approvers_enough(r) is not None
        ]
        return ids

    def run_pending(self, request_id: str) -> Outcome | None:
        """Resume or execute one of `pending()`; None when someone else got to it first."""
        execution = self.store.execution(request_id)
        if execution is None:
            return self.execute(request_id)
        if execution.finished_at is not None:
            return None
        return self._resume(execution)

    def _resume(self, unfinished: Execution) -> Outcome | None:
        if not self.ownership.reserve(unfinished.request_id):
            return None  # running here right now, e.g. a drain started by a click
        with self.ownership.owning(unfinished.request_id, unfinished.outcome) as held:
            now = self.clock()
            stale_before = now - timedelta(seconds=self.settings.remediation.execution_stale_s)
            if not held.take_over(stale_before):
                return None  # its owner is alive (heartbeat fresh) or another took it over
            request = self.store.request(unfinished.request_id)
            approvers = self.voting.approvers_enough(request)
            if approvers is None:
                return self._fail(held, request, self._say("exec.resume.no_approval"))
            if unfinished.outcome != "acting":
                # Died before its checks were through (facts, budget, gate, dry-run): nothing
                # was written, so run it as a first execution would, checks and all.
                if now >= request.expires_at:
                    expired = self._say("exec.resume.expired", at=request.expires_at)
                    return self._fail(held, request, expired)
                from_checks = self._say(
                    "exec.resume.from_checks",
                    command=command_for(request),
                    who=unfinished.executor,
                )
                self.timeline.note(request.incident, "note", from_checks, request=request.id)
                return self._checked_then_acted(held, request, approvers)
            resuming = self._say(
                "exec.resume.resuming",
                command=command_for(request),
                at=f"{unfinished.started_at:%H:%M:%S}",
                who=unfinished.executor,
            )
            self.timeline.note(request.incident, "note", resuming, request=request.id)
            # Its owner may have died between taking the node out and writing the start (a
            # no-op when it is executing already).
            executing = self._say("exec.executing")
            self.timeline.move(request.incident, IncidentState.EXECUTING, GPUBOT, executing)
            voters = [v.approver for v in self.store.votes(request.id)]
            return self._acted(held, request, voters, None, resumed=True)
