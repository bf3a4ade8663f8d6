"""kube-scheduler, as far as the simulated cluster needs it.

The profile `default-scheduler`, its filters in plugin order, the first failure per node
winning: NodeUnschedulable ("node(s) were unschedulable", unless the pod tolerates
`node.kubernetes.io/unschedulable`), TaintToleration on NoSchedule/NoExecute taints ("node(s)
had untolerated taint {KEY: VALUE}", as the simulated v1.30 control plane words it;
`hide_taint_values=True` gives "node(s) had untolerated taint(s)", the wording since
kubernetes/kubernetes#134740, 1.35 and backported to 1.34), NodeAffinity (nodeSelector and
required node affinity: matchExpressions In/NotIn/Exists/DoesNotExist/Gt/Lt, matchFields
metadata.name; "node(s) didn't match Pod's node affinity/selector"), NodeResourcesFit ("Too
many pods", "Insufficient cpu", "Insufficient memory", "Insufficient ephemeral-storage",
"Insufficient R" for extended resources such as nvidia.com/gpu), all against allocatable
minus the requests of the pods bound to the node that have not finished (Terminating pods
still hold theirs). A NotReady node that lacks the node lifecycle controller's taint is
treated as if it had it (`node.kubernetes.io/not-ready` or `unreachable`, NoSchedule).
Not simulated: host ports, volumes, pod (anti-)affinity, topology spread, scheduling gates.
A fitting pod is bound to the least allocated feasible node (cpu and memory with the
scheduler's non-zero defaults; ties by name) with a Normal `Scheduled` event. A pod that
fits nowhere gets `PodScheduled=False` (reason Unschedulable) and a Warning
`FailedScheduling` event with `FitError.Error()`'s message: "0/N nodes are available: " +
the per-reason node counts formatted "COUNT REASON" and sorted as strings (so by count
first), then the DefaultPreemption sentence computed as the scheduler does it: nodes that
failed an unresolvable filter (or lack the resource altogether) give "Preemption is not
helpful for scheduling", nodes without lower-priority pods "No preemption victims found for
incoming pod", `preemptionPolicy: Never` gives "not eligible due to preemptionPolicy=Never.".
Preemption itself is not simulated: when evicting lower-priority pods would make room, the
message has no preemption sentence and the pod stays Pending.
The event has the shape the scheduler's events.k8s.io recorder leaves when read as core/v1
(`eventTime`, `action`, `reportingComponent`, `series` for repeats). No spam: one event per
distinct message; the same failure again is not recorded until the scheduler would retry
it by itself (5 minutes, `podMaxInUnschedulablePodsDuration`), and then the existing
event's `series.count` / `series.lastObservedTime` move instead of a new event appearing.

It binds and records; it must never start a pod (the kubelet's business) nor evict one
(preemption is not simulated).
"""

from __future__ import annotations

import copy
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot.kube_objects import (
    labels_of,
    meta,
    name_of,
    namespace_of,
    parse_time,
    pod_finished,
    pod_requests,
    resource_amount,
    spec_of,
    status_of,
)
from gpusim.objects import (
    DEFAULT_SCHEDULER,
    NOT_READY_TAINT,
    UNREACHABLE_TAINT,
    UNSCHEDULABLE_TAINT,
    Json,
    ts,
)
from gpusim.reading import (
    condition_of,
    list_all,
    micro,
    node_ready,
    phase_of,
    priority_of,
    terminating,
    uid_of,
)
from gpusim.recording import EventRecorder
from gpusim.resources import BY_KIND, ApiError
from gpusim.state import ClusterState

log = logging.getLogger(__name__)

UNSCHEDULABLE_RETRY = timedelta(minutes=5)
"""kube-scheduler's podMaxInUnschedulablePodsDuration: an unschedulable pod is retried (and
its FailedScheduling recorded again) at least this often even when nothing changed."""


MSG_UNSCHEDULABLE = "node(s) were unschedulable"


MSG_AFFINITY = "node(s) didn't match Pod's node affinity/selector"


MSG_TAINTS_HIDDEN = "node(s) had untolerated taint(s)"


MSG_TOO_MANY_PODS = "Too many pods"


MSG_NOT_HELPFUL = "Preemption is not helpful for scheduling"


MSG_NO_VICTIMS = "No preemption victims found for incoming pod"


MSG_PREEMPT_NEVER = "not eligible due to preemptionPolicy=Never."


MSG_NO_NODES = "no nodes available to schedule pods"


_UNRESOLVABLE = "UnschedulableAndUnresolvable"


_RESOLVABLE = "Unschedulable"


_NONZERO_CPU_MILLI = 100


_NONZERO_MEMORY = 200 * 1024 * 1024


_CORE = ("cpu", "memory", "ephemeral-storage")


_PODS = BY_KIND["Pod"]


_NODES = BY_KIND["Node"]


_EVENTS = BY_KIND["Event"]


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """v1.Toleration.ToleratesTaint."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def untolerated_taint(
    taints: Iterable[Mapping[str, Any]],
    tolerations: Iterable[Mapping[str, Any]],
    effects: tuple[str, ...] = ("NoSchedule", "NoExecute"),
) -> Mapping[str, Any] | None:
    """FindMatchingUntoleratedTaint: the first taint with one of `effects` nothing tolerates."""
    tolerations = list(tolerations)
    for taint in taints:
        if taint.get("effect") not in effects:
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def _requirement_matches(requirement: Mapping[str, Any], values: Mapping[str, str]) -> bool:
    key = str(requirement.get("key", ""))
    operator = requirement.get("operator")
    wanted = [str(v) for v in requirement.get("values") or []]
    present = key in values
    if operator == "In":
        return present and values[key] in wanted
    if operator == "NotIn":
        return not present or values[key] not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(wanted) == 1:
        try:
            have, limit = int(values[key]), int(wanted[0])
        except ValueError:
            return False
        return have > limit if operator == "Gt" else have < limit
    return False


def _term_matches(term: Mapping[str, Any], node: Json) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term matches no objects
    labels = labels_of(node)
    node_fields = {"metadata.name": name_of(node)}
    return all(_requirement_matches(e, labels) for e in expressions) and all(
        _requirement_matches(f, node_fields) for f in fields
    )


def node_affinity_matches(pod_spec: Mapping[str, Any], node: Json) -> bool:
    """nodeSelector (every pair) and requiredDuringSchedulingIgnoredDuringExecution (any term)."""
    labels = labels_of(node)
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(str(key)) != str(value):
            return False
    affinity = (pod_spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    return any(_term_matches(term, node) for term in required.get("nodeSelectorTerms") or [])


@dataclass
class _NodeInfo:
    """The scheduler cache's view of one node for one round."""

    node: Json
    name: str
    taints: list[Json]
    allocatable: dict[str, int]
    pods: list[Json] = field(default_factory=list)
    requested: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    nonzero_cpu: int = 0
    nonzero_memory: int = 0

    @classmethod
    def build(cls, node: Json) -> _NodeInfo:
        taints = [t for t in spec_of(node).get("taints") or [] if isinstance(t, dict)]
        keys = {t.get("key") for t in taints}
        ready = node_ready(node)
        # The node lifecycle controller taints a NotReady node; a simulated node may lack it.
        if ready == "False" and NOT_READY_TAINT not in keys:
            taints.append({"key": NOT_READY_TAINT, "effect": "NoSchedule"})
        elif ready != "True" and not keys & {NOT_READY_TAINT, UNREACHABLE_TAINT}:
            taints.append({"key": UNREACHABLE_TAINT, "effect": "NoSchedule"})
        allocatable = {
            str(k): resource_amount(str(k), v)
            for k, v in (status_of(node).get("allocatable") or {}).items()
        }
        return cls(node, name_of(node), taints, allocatable)

    def add(self, pod: Json) -> None:
        self.pods.append(pod)
        requests = pod_requests(pod)
        for name, amount in requests.items():
            self.requested[name] += amount
        self.nonzero_cpu += requests.get("cpu") or _NONZERO_CPU_MILLI
        self.nonzero_memory += requests.get("memory") or _NONZERO_MEMORY

    def without(self, victims: list[Json]) -> _NodeInfo:
        gone = {id(p) for p in victims}
        clone = _NodeInfo(self.node, self.name, self.taints, self.allocatable)
        for pod in self.pods:
            if id(pod) not in gone:
                clone.add(pod)
        return clone

    def insufficient(self, requests: Mapping[str, int]) -> list[tuple[str, bool]]:
        """NodeResourcesFit's fitsRequest: (reason, unresolvable) per resource short."""
        short: list[tuple[str, bool]] = []
        if len(self.pods) + 1 > self.allocatable.get("pods", 0):
            short.append((MSG_TOO_MANY_PODS, False))
        for name in (*_CORE, *sorted(r for r in requests if r not in _CORE)):
            wanted = requests.get(name, 0)
            if wanted <= 0 or name == "pods":
                continue
            capacity = self.allocatable.get(name, 0)
            if wanted > capacity - self.requested.get(name, 0):
                short.append((f"Insufficient {name}", wanted > capacity))
        return short

    def load_after(self, requests: Mapping[str, int]) -> float:
        """LeastAllocated over cpu and memory (lower is better), non-zero defaults applied."""
        cpu = self.nonzero_cpu + (requests.get("cpu") or _NONZERO_CPU_MILLI)
        memory = self.nonzero_memory + (requests.get("memory") or _NONZERO_MEMORY)
        shares = [
            used / capacity
            for used, capacity in (
                (cpu, self.allocatable.get("cpu", 0)),
                (memory, self.allocatable.get("memory", 0)),
            )
            if capacity > 0
        ]
        return sum(shares) / len(shares) if shares else 1.0


@dataclass(frozen=True)
class _Status:
    """framework.Status of a failed filter: its code and reasons."""

    code: str
    reasons: tuple[str, ...]


def _histogram(statuses: Iterable[_Status]) -> str:
    counts: dict[str, int] = defaultdict(int)
    for status in statuses:
        for reason in status.reasons:
            counts[reason] += 1
    return ", ".join(sorted(f"{count} {reason}" for reason, count in counts.items()))


@dataclass
class _Attempt:
    """The last FailedScheduling recorded for a pod."""

    message: str
    event: str
    at: datetime


class Scheduler:
    """The default profile's filters and scoring over a ClusterState, one pass at a time. It
    owns the last FailedScheduling it recorded for each pending pod, to repeat it as the
    events recorder does instead of recording the same failure again."""

    def __init__(
        self, store: ClusterState, events: EventRecorder, *, hide_taint_values: bool = False
    ) -> None:
        self.store = store
        self._events = events
        self._hide_taint_values = hide_taint_values
        self._attempts: dict[str, _Attempt] = {}

    def schedule(self, pods: list[Json], now: datetime) -> list[str]:
        nodes = list_all(self.store, _NODES)
        infos = {name_of(node): _NodeInfo.build(node) for node in nodes}
        for pod in pods:
            node = spec_of(pod).get("nodeName")
            if node in infos and not pod_finished(pod):
                infos[str(node)].add(pod)
        waiting = sorted(
            (
                p
                for p in pods
                if not spec_of(p).get("nodeName")
                and not terminating(p)
                and phase_of(p) == "Pending"
                and (spec_of(p).get("schedulerName") or DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER
                and not spec_of(p).get("schedulingGates")
            ),
            key=lambda p: (-priority_of(p), str(meta(p).get("creationTimestamp", "")), name_of(p)),
        )
        live = {uid_of(p) for p in pods}
        self._attempts = {uid: a for uid, a in self._attempts.items() if uid in live}
        changes: list[str] = []
        for pod in waiting:
            requests = pod_requests(pod)
            statuses: dict[str, _Status] = {}
            feasible: list[_NodeInfo] = []
            for info in infos.values():
                status = self._filter(pod, requests, info)
                if status is None:
                    feasible.append(info)
                else:
                    statuses[info.name] = status
            if feasible:
                best = min(feasible, key=lambda i: (i.load_after(requests), i.name))
                bound = self._bind(pod, best.name, now)
                if bound is not None:
                    best.add(bound)
                    self._attempts.pop(uid_of(pod), None)
                    changes.append(f"{namespace_of(pod)}/{name_of(pod)} bound to {best.name}")
                continue
            message = self._fit_error(pod, requests, infos, statuses)
            changes += self._unschedulable(pod, message, now)
        return changes

    def _filter(self, pod: Json, requests: Mapping[str, int], info: _NodeInfo) -> _Status | None:
        """The default profile's Filter plugins in order; the first failure decides."""
        spec = spec_of(pod)
        tolerations = [t for t in spec.get("tolerations") or [] if isinstance(t, dict)]
        if spec_of(info.node).get("unschedulable") and not any(
            tolerates(t, {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}) for t in tolerations
        ):
            return _Status(_UNRESOLVABLE, (MSG_UNSCHEDULABLE,))
        taint = untolerated_taint(info.taints, tolerations)
        if taint is not None:
            key, value = taint.get("key", ""), taint.get("value", "")
            reason = (
                MSG_TAINTS_HIDDEN
                if self._hide_taint_values
                else f"node(s) had untolerated taint {{{key}: {value}}}"
            )
            return _Status(_UNRESOLVABLE, (reason,))
        if not node_affinity_matches(spec, info.node):
            return _Status(_UNRESOLVABLE, (MSG_AFFINITY,))
        short = info.insufficient(requests)
        if short:
            code = _UNRESOLVABLE if any(unresolvable for _, unresolvable in short) else _RESOLVABLE
            return _Status(code, tuple(reason for reason, _ in short))
        return None

    def _fit_error(
        self,
        pod: Json,
        requests: Mapping[str, int],
        infos: Mapping[str, _NodeInfo],
        statuses: Mapping[str, _Status],
    ) -> str:
        """FitError.Error(), with DefaultPreemption's PostFilter message."""
        if not infos:
            return MSG_NO_NODES
        total = len(infos)
        message = f"0/{total} nodes are available: {_histogram(statuses.values())}."
        if spec_of(pod).get("preemptionPolicy") == "Never":
            return f"{message} preemption: {MSG_PREEMPT_NEVER}"
        priority = priority_of(pod)
        preemption: list[_Status] = []
        for name, status in statuses.items():
            if status.code == _UNRESOLVABLE:
                preemption.append(_Status(_UNRESOLVABLE, (MSG_NOT_HELPFUL,)))
                continue
            info = infos[name]
            victims = [p for p in info.pods if priority_of(p) < priority]
            if not victims:
                preemption.append(_Status(_UNRESOLVABLE, (MSG_NO_VICTIMS,)))
                continue
            after = self._filter(pod, requests, info.without(victims))
            if after is None:
                return message  # a preemption candidate: the scheduler would nominate it
            preemption.append(after)
        return f"{message} preemption: 0/{total} nodes are available: {_histogram(preemption)}."

    def _bind(self, pod: Json, node: str, now: datetime) -> Json | None:
        """POST pods/NAME/binding: nodeName set and PodScheduled=True, as the registry does."""
        body = copy.deepcopy(pod)
        body["spec"]["nodeName"] = node
        status = body.setdefault("status", {})
        status["conditions"] = [
            c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"
        ] + [
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": ts(now),
            }
        ]
        try:
            bound = self.store.replace(_PODS, namespace_of(pod), name_of(pod), body)
        except ApiError:
            return None  # changed or gone meanwhile: the next round sees it again
        self._events.emit(
            pod,
            "Normal",
            "Scheduled",
            f"Successfully assigned {namespace_of(pod)}/{name_of(pod)} to {node}",
            now,
            action="Binding",
        )
        return bound

    def _unschedulable(self, pod: Json, message: str, now: datetime) -> list[str]:
        changes: list[str] = []
        condition = condition_of(pod, "PodScheduled")
        if condition is None or (
            condition.get("status"),
            condition.get("reason"),
            condition.get("message"),
        ) != ("False", "Unschedulable", message):
            body = copy.deepcopy(pod)
            keep = condition is not None and condition.get("status") == "False"
            updated = {
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": None,
                "lastTransitionTime": condition.get("lastTransitionTime")
                if keep and condition is not None
                else ts(now),
                "reason": "Unschedulable",
                "message": message,
            }
            status = body.setdefault("status", {})
            status["conditions"] = [
                c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"
            ] + [updated]
            try:
                self.store.replace(_PODS, namespace_of(pod), name_of(pod), body)
            except ApiError:
                return []
            changes.append(f"{namespace_of(pod)}/{name_of(pod)} unschedulable: {message}")
        uid = uid_of(pod)
        attempt = self._attempts.get(uid)
        if attempt is None or attempt.message != message:
            attempt = self._recorded_attempt(pod, message)
        if attempt is not None and now - attempt.at < UNSCHEDULABLE_RETRY:
            self._attempts[uid] = attempt
            return changes
        event = self._repeat(pod, attempt, now) if attempt is not None else None
        if event is None:
            event = self._events.emit(pod, "Warning", "FailedScheduling", message, now)
        self._attempts[uid] = _Attempt(message, name_of(event), now)
        changes.append(f"{namespace_of(pod)}/{name_of(pod)}: FailedScheduling recorded")
        return changes

    def _recorded_attempt(self, pod: Json, message: str) -> _Attempt | None:
        """The same failure already in the store (recorded by an earlier Controllers)."""
        events, _ = self.store.list(
            _EVENTS,
            namespace_of(pod),
            field_selector=f"involvedObject.name={name_of(pod)},reason=FailedScheduling",
        )
        for event in events:
            involved = event.get("involvedObject") or {}
            if involved.get("uid") != uid_of(pod) or event.get("message") != message:
                continue
            if event.get("reportingComponent") != DEFAULT_SCHEDULER:
                continue
            series = event.get("series") or {}
            when = parse_time(series.get("lastObservedTime")) or parse_time(event.get("eventTime"))
            if when is not None:
                return _Attempt(message, name_of(event), when)
        return None

    def _repeat(self, pod: Json, attempt: _Attempt, now: datetime) -> Json | None:
        """The recorder's isomorphic event: bump its series instead of a new event."""
        try:
            event = self.store.get(_EVENTS, namespace_of(pod), attempt.event)
        except ApiError:
            return None
        series = event.get("series") or {}
        event["series"] = {
            "count": int(series.get("count") or 1) + 1,
            "lastObservedTime": micro(now),
        }
        try:
            return self.store.replace(_EVENTS, namespace_of(pod), attempt.event, event)
        except ApiError:
            return None
