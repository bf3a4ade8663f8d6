"""What an approved action does to its node, and the sentence that tells what came of it.

A cordon or drain takes the node out in one patch guarded by the node's resourceVersion
(cordon, the maintenance taint, and annotations saying which incident and who approved), so
a node gpubot took out always says why, and a change made meanwhile by someone else is read
again rather than overwritten; the first run and a resumed one take this same path. A drain
then evicts with kubectl's semantics (`bot.acting.draining`), stopping as soon as this
process no longer owns it. An uncordon takes the cordon, the taint and the annotations away.

What it must never do: decide whether the action may run (the executor has checked), or
evict once the execution was taken over by another process.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from bot.acting.cordoning import put_back, take_out
from bot.acting.draining import drain
from bot.clock import Clock
from bot.config import Settings
from bot.incidents.timeline import Timeline
from bot.model import Action, ActionRequest
from bot.names import MAINTENANCE_TAINT, PREFIX
from bot.ports import Cluster, Store
from bot.texts import say

OUR_ANNOTATIONS = ("incident", "approved-by", "reason", "since")


class Fence(Protocol):
    """What a write to the cluster asks first (`bot.acting.executions.Held`)."""

    @property
    def displaced(self) -> threading.Event: ...
    def may_write(self) -> bool: ...


@dataclass(frozen=True)
class Acted:
    """What an action did, as codes the executor branches on and the sentence it tells."""

    text: str
    done: bool = True
    """False: a drain refused or incomplete (a failure, not a success)."""
    drained: str = ""
    """For a completed drain, the detail of its line ("evicted 2 pods in 0.3 s")."""


class NodeActions:
    """Owns nothing: each call reads and writes the node through the Cluster port. Never:
    deletes a pod unless the request carries `force` (kubectl's --disable-eviction)."""

    def __init__(
        self, cluster: Cluster, store: Store, settings: Settings, clock: Clock, timeline: Timeline
    ) -> None:
        self.cluster = cluster
        self.store = store
        self.settings = settings
        self.clock = clock
        self.timeline = timeline

    def _say(self, key: str, **values: object) -> str:
        return say(self.settings.lang, key, **values)

    def take_out(
        self, request: ActionRequest, approvers: list[str], current: Mapping[str, Any] | None
    ) -> bool:
        """Cordon, taint and annotations in one patch on the node as `current` shows it (None:
        read it now); True when this cordoned it."""
        incident = request.incident or "none"
        taint = None
        if self.settings.remediation.maintenance_taint:
            taint = {"key": MAINTENANCE_TAINT, "value": incident, "effect": "NoSchedule"}
        annotations = {
            f"{PREFIX}incident": incident,
            f"{PREFIX}approved-by": ",".join(approvers),
            f"{PREFIX}reason": f"{request.action.value} approved in gpubot",
            f"{PREFIX}since": self.clock().isoformat(),
        }
        return take_out(self.cluster, request.node, current, taint, annotations).changed

    def perform(
        self, request: ActionRequest, approvers: list[str], cordoned: bool | None, fence: Fence
    ) -> Acted:
        """`cordoned`: whether the node was just taken out for this action (None: not yet, a
        resumed execution: taken out here, by the same one patch). Every write passes
        `fence` first; once it says no, nothing more is written (`Acted.done` false)."""
        node = request.node
        if not fence.may_write():
            return Acted("", done=False)
        if request.action is Action.UNCORDON:
            ours = [f"{PREFIX}{k}" for k in OUR_ANNOTATIONS]
            changed = put_back(self.cluster, node, None, MAINTENANCE_TAINT, ours).changed
            key = "exec.uncordoned" if changed else "exec.was_not_cordoned"
            return Acted(self._say(key, node=node))
        if cordoned is None:
            # Marked before the drain, so the node says why it is cordoned while pods leave.
            cordoned = self.take_out(request, approvers, None)
        if request.action is Action.CORDON:
            return Acted(self._say("exec.cordoned" if cordoned else "exec.was_cordoned", node=node))
        return self._drain(request, fence)

    def _drain(self, request: ActionRequest, fence: Fence) -> Acted:
        result = drain(
            self.cluster,
            request.node,
            timeout_s=self.settings.remediation.drain_timeout_s,
            delete_emptydir_data=request.delete_emptydir_data,
            allow_unmanaged=request.force,
            disable_eviction=request.force,
            on_progress=self.timeline.drain_progress(request),
            keep_going=fence.may_write,
            stop=fence.displaced,
        )
        if result.refused:
            reasons = self._say("gate.separator").join(
                self._say(
                    "exec.drain_refusal", pod=f"{r.namespace}/{r.name}", why=r.message, flag=r.flag
                )
                for r in result.plan.refusals
            )
            return Acted(self._say("exec.drain_refused", reasons=reasons), done=False)
        removed = len(result.evicted) + len(result.deleted)
        if result.stalled:
            stalls = "; ".join(f"{s.namespace}/{s.name}: {s.reason}" for s in result.stalled)
            # Of the pods the drain had to move (DaemonSet pods stay and are not counted).
            wanted = len(result.plan.to_remove)
            incomplete = self._say(
                "exec.drain_incomplete",
                removed=removed,
                wanted=wanted,
                stuck=len(result.stalled),
                stalls=stalls,
            )
            return Acted(incomplete, done=False)
        how = self._say("exec.deleted_how" if request.force else "exec.evicted_how")
        # After a restart some pods were already leaving (evicted before the kill): they were
        # waited for, not evicted again, and the count says so instead of looking short.
        leaving = len(result.plan.to_remove) - removed
        already = self._say("exec.already_leaving", n=leaving) if leaving > 0 else ""
        detail = self._say(
            "exec.drain_detail",
            how=how,
            removed=removed,
            already=already,
            seconds=result.duration_s,
        )
        return Acted(self._say("exec.drained", node=request.node, detail=detail), drained=detail)

    def whole_drain(self, request: ActionRequest, resumed: str) -> str:
        """A drain taken over after its owner died tells the whole drain, not its last part:
        the pods it had to move when it began (every owner's evictions) and the time since it
        began. `resumed`: what this owner's part did (the detail of its drained line); "" when
        the timeline does not say where the drain began."""
        entries = self.store.timeline(request.incident) if request.incident else []
        start = next(
            (
                e
                for e in entries
                if e.kind == "action-start" and e.data.get("request") == request.id
            ),
            None,
        )
        execution = self.store.execution(request.id)
        began = start.at if start is not None else (execution.started_at if execution else None)
        total = start.data.get("pods") if start is not None else None
        if began is None or not isinstance(total, int):
            return ""  # nothing tells where the drain began: this owner's part is all there is
        took = (self.clock() - began).total_seconds()
        whole = self._say("exec.whole_drain", total=total, seconds=took, last=resumed)
        return self._say("exec.drained", node=request.node, detail=whole)
