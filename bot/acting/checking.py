"""Everything that may still stop an approved action, looked at once more just before it runs:
the node read again and compared with what the approval saw (docs/architecture.md, invariant
2), the pool's budget before a cordon or drain (invariant 6), the health gate before an
uncordon (invariant 5), and dry-run.

Why it exists: an approval is a person's answer about the node as it was; by the time it
runs, the node may have rebooted, been cordoned by someone else or lost its GPUs. The
executor asks this one question and does what the answer says.

What it must never do: write to the node or to the execution row (it answers; the executor
records), or pass an action whose node it could not read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.approval.blast_radius import check_budget
from bot.approval.policy import facts_fingerprint, facts_seen, what_matters
from bot.config import Settings
from bot.errors import GpubotError
from bot.facts.fresh import FreshFacts
from bot.gate.gating import HealthGate
from bot.gate.items import failing_text
from bot.incidents.timeline import Timeline
from bot.kube_objects import Obj, name_of
from bot.model import Action, ActionRequest, Lang, NodeFacts
from bot.texts import say

StopKind = Literal["unreadable", "gone", "changed", "blast-radius", "health-gate", "dry-run"]


@dataclass(frozen=True)
class Cleared:
    """An approved action past every check, with what the check read."""

    current: Obj
    """The node object as read, the patch computed from it ({} when not a cordon or drain)."""
    node: NodeFacts


@dataclass(frozen=True)
class Stop:
    """Why the action must not run now, in the settings' language."""

    kind: StopKind
    why: str
    node: NodeFacts | None = None
    """With `changed`: the node as it is now, for the request that asks again."""


def what_changed(before: dict[str, object], after: dict[str, object], lang: Lang) -> str:
    changed = [
        f"{key}: {before.get(key)!r} → {after.get(key)!r}"
        for key in sorted(after)
        if before.get(key) != after.get(key)
    ]
    return "; ".join(changed) or say(lang, "exec.changed_facts")


class Checks:
    """Owns nothing: reads the node afresh at every call. Never: remembers an answer."""

    def __init__(
        self, settings: Settings, facts: FreshFacts, gate: HealthGate, timeline: Timeline
    ) -> None:
        self.settings = settings
        self.facts = facts
        self.gate = gate
        self.timeline = timeline

    def before_acting(self, request: ActionRequest) -> Cleared | Stop:
        lang = self.settings.lang
        current: Obj = {}
        try:
            if request.action in (Action.CORDON, Action.DRAIN):
                snapshot, facts = self.facts.to_take_out(request.node, request.action)
                current = next((n for n in snapshot.nodes if name_of(n) == request.node), {})
            else:
                facts = self.facts.of_node(request.node)
        except GpubotError as exc:
            return Stop("unreadable", say(lang, "exec.unreadable", node=request.node, error=exc))
        node = facts.nodes.get(request.node)
        if node is None or not node.known:
            return Stop("gone", say(lang, "exec.gone", node=request.node))

        seen = what_matters(request.action, facts_seen(node))
        expected = what_matters(request.action, request.facts_seen)
        if request.action is Action.DRAIN and node.unschedulable:
            # A drain cordons first: a cordon since the approval (ours or a person's) is
            # what the drain would do anyway, not a material change.
            expected["unschedulable"] = True
        if facts_fingerprint(node) != request.facts_fingerprint and seen != expected:
            return Stop("changed", what_changed(request.facts_seen, seen, lang), node)

        if request.action in (Action.CORDON, Action.DRAIN):
            limits = self.settings.remediation.blast_radius
            verdict = check_budget(facts, request.node, limits, lang)
            if not verdict.allowed:
                return Stop("blast-radius", verdict.reason)
        if request.action is Action.UNCORDON and not request.override_gate:
            result = self.gate.judge(node, facts)
            self.timeline.gate(request.incident, result)
            if not result.passed:
                failing = failing_text(result.failing, lang)
                return Stop("health-gate", say(lang, "exec.gate.not_passed", failing=failing))

        if self.settings.remediation.dry_run:
            return Stop("dry-run", "")
        return Cleared(current, node)
