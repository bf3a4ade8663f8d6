"""A little of kubelet, kube-scheduler and the workload controllers, for the simulated cluster.

Opt-in: nothing here runs unless someone builds `Controllers(store)` and calls `reconcile()`
(one deterministic round, for tests) or `start()` (a background thread that follows the
store's watch history of pods, nodes, DaemonSets and ReplicaSets and reconciles after each
burst of changes) and later `stop()`. Every change goes through `ClusterState.create` / `replace` /
`delete`, so watchers and kubectl see the same sequence a real cluster shows.

What each part does, and where it stops short of the real component:

- Job and ReplicaSet controllers. A pod whose controller (ownerReference `controller: true`)
  is a Job or a ReplicaSet and that is lost (deleted, evicted, Terminating, or Failed) gets one
  replacement: the old pod's labels, annotations, ownerReferences and spec without `nodeName`,
  `generateName` = owner name + "-", phase Pending, no container statuses. Jobs never replace
  a Succeeded pod. The store has no Job kind, so a Job is implicit: one replacement per lost
  pod (no backoffLimit, no completions). ReplicaSets: when the store holds the ReplicaSet
  object, it is reconciled level-based on `spec.replicas` (create from `spec.template`, delete
  the surplus, keep `status` current) and lost pods are not replaced one by one; once seen and
  then deleted, its pods are never replaced (the garbage collector's business, not simulated).
  When the store never held it (the scenarios create pods owned by ReplicaSets without the
  objects), it is implicit, like a Job: one replacement per lost pod.
- kubelet. A pod bound to a Ready node and still Pending is admitted, then starts: phase
  Running, the five conditions True, containers running, init containers Completed. A running
  pod that is deleted or starts Terminating gets the kubelet's Normal `Killing` "Stopping
  container C" event (source host = the node), which is what `collect_facts` reads as
  `evicted_from`. Admission checks extended resources only (what a pod bound by `nodeName`
  past the scheduler can lack): a registered device plugin's resource (capacity above 0) goes
  through the device manager ("Allocate failed due to no healthy devices present; cannot
  allocate unhealthy devices R, which is unexpected" when allocatable is 0, "... requested
  number of devices unavailable for R. Requested: N, Available: A ..." when the running pods
  hold the rest; reason `UnexpectedAdmissionError`), an unregistered one (capacity 0) through
  the predicate check (`OutOfR`, "Node didn't have enough resource: R, requested: N, used: U,
  capacity: C"), and a resource the node does not list at all is ignored, as the kubelet does.
  A rejected pod is Failed with message "Pod was rejected: " + the reason's text, and gets a
  Warning event with that reason. cpu, memory and pod count are left to the scheduler.
- `nvidia-smi -L`. A pod with `restartPolicy: Never` whose every container runs `nvidia-smi
  -L` (as command and args, or inside a shell line) runs to completion instead of running
  forever, and the kubelet keeps
  what it printed for `GET pods/NAME/log` (`container_log`). The container sees every GPU of
  the node with `NVIDIA_VISIBLE_DEVICES=all` (indexed as on the host), otherwise the first
  GPUs the device plugin calls healthy, as many as it requests (numbered from 0, as in a
  container). A GPU that fell off the bus (last Xid 79 in `faults.gpu_state`) is not listed:
  "Unable to determine the device handle for GPU BUS: GPU is lost.  Reboot the system to
  recover this GPU", exit code 15. Without a loaded driver (the node expects the GPU
  Operator's driver pod, `nvidia.com/gpu.deploy.driver=true`, and none is Running and Ready)
  it prints "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.
  ..." and exits 9. Exit 0 makes the pod Succeeded, anything else Failed.
- kube-scheduler (profile `default-scheduler`, filters in its plugin order, first failure
  per node wins): NodeUnschedulable ("node(s) were unschedulable", unless the pod tolerates
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
- DaemonSet controller. One pod per node where the template's nodeSelector and required
  node affinity match and no NoSchedule/NoExecute taint is untolerated (with the default
  DaemonSet tolerations added, among them `node.kubernetes.io/unschedulable`): created with
  the controller's `metadata.name` node affinity and bound by the scheduler above; deleted
  when the node stops matching, when it gains an untolerated NoExecute taint, or when it
  disappears; a Failed pod is deleted and replaced; `status` kept current. The GPU Operator
  sets each DaemonSet's nodeSelector to `nvidia.com/gpu.deploy.<component>=true`, which is
  how mig-manager makes pods vanish by setting those labels to false.

Cost: every round lists pods, nodes and the workload objects; the controllers keep one
reference to each listed pod between rounds. Fine for the test and demo clusters; on the
5,000-node scenario a round takes seconds.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import logging
import re
import threading
import time
import uuid
import weakref
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.kube.objects import (
    container_requests,
    labels_of,
    name_of,
    namespace_of,
    parse_time,
    pod_ready,
    pod_requests,
    quantity,
    resource_amount,
)
from gpusim.hardware import XID_FELL_OFF_BUS, gpu_state
from gpusim.metrics import gpu_uuid, model_name, pci_bus_id
from gpusim.objects import GPU_OPERATOR_NS, Json, ts
from gpusim.resources import BY_KIND, ApiError, ResourceType
from gpusim.state import ClusterState

log = logging.getLogger(__name__)

SCHEDULER = "default-scheduler"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
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
_FINISHED = ("Succeeded", "Failed")
_CORE = ("cpu", "memory", "ephemeral-storage")
_DAEMON_TOLERATIONS = (
    {"key": NOT_READY_TAINT, "operator": "Exists", "effect": "NoExecute"},
    {"key": UNREACHABLE_TAINT, "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": UNSCHEDULABLE_TAINT, "operator": "Exists", "effect": "NoSchedule"},
)
"""What the DaemonSet controller adds to every pod it creates (AddOrUpdateDaemonPodTolerations)."""
_OMIT_EMPTY = frozenset(
    {
        "numberAvailable",
        "numberUnavailable",
        "updatedNumberScheduled",
        "readyReplicas",
        "availableReplicas",
        "fullyLabeledReplicas",
    }
)
"""Status fields the API leaves out when 0 (`omitempty`)."""
_POD_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
GPU_RESOURCE = "nvidia.com/gpu"
DRIVER_APP = "nvidia-driver-daemonset"
NVIDIA_SMI_NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running."
)
_NVIDIA_SMI_LIST = re.compile(r"(?:^|[\s;&|(/])nvidia-smi\s+(?:-L|--list-gpus)(?=$|[\s;&|)])")
_SMI_DRIVER_NOT_LOADED = 9
_SMI_NOT_FOUND = 6
_SMI_GPU_LOST = 15
_PODS = BY_KIND["Pod"]
_NODES = BY_KIND["Node"]
_EVENTS = BY_KIND["Event"]
_DAEMONSETS = BY_KIND["DaemonSet"]
_REPLICASETS = BY_KIND["ReplicaSet"]
_FOLLOWED = (_PODS, _NODES, _DAEMONSETS, _REPLICASETS)


# ---- small readers -------------------------------------------------------------------------


def _meta(obj: Json) -> Json:
    value = obj.get("metadata")
    return value if isinstance(value, dict) else {}


def _spec(obj: Json) -> Json:
    value = obj.get("spec")
    return value if isinstance(value, dict) else {}


def _status(obj: Json) -> Json:
    value = obj.get("status")
    return value if isinstance(value, dict) else {}


def _uid(obj: Json) -> str:
    return str(_meta(obj).get("uid", ""))


def _phase(pod: Json) -> str:
    return str(_status(pod).get("phase") or "Pending")


def _terminating(obj: Json) -> bool:
    return bool(_meta(obj).get("deletionTimestamp"))


def _priority(pod: Json) -> int:
    value = _spec(pod).get("priority")
    return int(value) if isinstance(value, int) else 0


def _condition(obj: Json, kind: str) -> Json | None:
    for condition in _status(obj).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == kind:
            return condition
    return None


def _node_ready(node: Json) -> str:
    condition = _condition(node, "Ready")
    return str(condition.get("status")) if condition else "Unknown"


def _controller_ref(obj: Json) -> Json | None:
    for ref in _meta(obj).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def _owned_by(pod: Json, kind: str, owner: Json) -> bool:
    ref = _controller_ref(pod)
    if ref is None or ref.get("kind") != kind or namespace_of(pod) != namespace_of(owner):
        return False
    if ref.get("uid") and _uid(owner):
        return str(ref["uid"]) == _uid(owner)
    return ref.get("name") == name_of(owner)


def _micro(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _short_hash(*parts: str, length: int = 10) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    raw = hashlib.sha256("/".join(parts).encode()).digest()
    return "".join(alphabet[b % len(alphabet)] for b in raw[:length])


# ---- scheduling predicates ------------------------------------------------------------------


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
        taints = [t for t in _spec(node).get("taints") or [] if isinstance(t, dict)]
        keys = {t.get("key") for t in taints}
        ready = _node_ready(node)
        # The node lifecycle controller taints a NotReady node; a simulated node may lack it.
        if ready == "False" and NOT_READY_TAINT not in keys:
            taints.append({"key": NOT_READY_TAINT, "effect": "NoSchedule"})
        elif ready != "True" and not keys & {NOT_READY_TAINT, UNREACHABLE_TAINT}:
            taints.append({"key": UNREACHABLE_TAINT, "effect": "NoSchedule"})
        allocatable = {
            str(k): resource_amount(str(k), v)
            for k, v in (_status(node).get("allocatable") or {}).items()
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
    code: str
    reasons: tuple[str, ...]


def _histogram(statuses: Iterable[_Status]) -> str:
    counts: dict[str, int] = defaultdict(int)
    for status in statuses:
        for reason in status.reasons:
            counts[reason] += 1
    return ", ".join(sorted(f"{count} {reason}" for reason, count in counts.items()))


# ---- the controllers ------------------------------------------------------------------------


class _Recent:
    """A bounded set of uids already acted on (oldest forgotten first)."""

    def __init__(self, capacity: int = 200_000) -> None:
        self._items: OrderedDict[str, None] = OrderedDict()
        self._capacity = capacity

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def add(self, key: str) -> None:
        self._items[key] = None
        self._items.move_to_end(key)
        while len(self._items) > self._capacity:
            self._items.popitem(last=False)


@dataclass
class _Attempt:
    """The last FailedScheduling recorded for a pod."""

    message: str
    event: str
    at: datetime


class Controllers:
    """kubelet, kube-scheduler and the Job / ReplicaSet / DaemonSet controllers over a
    ClusterState."""

    def __init__(
        self,
        store: ClusterState,
        now_fn: Callable[[], datetime] | None = None,
        *,
        hide_taint_values: bool = False,
        scheduler_instance: str = "default-scheduler-control-plane",
        settle_s: float = 0.05,
        resync_s: float = 30.0,
    ) -> None:
        self.store = store
        self._now = now_fn or (lambda: datetime.now(UTC))
        self._hide_taint_values = hide_taint_values
        self._scheduler_instance = scheduler_instance
        self._settle_s = settle_s
        self._resync_s = resync_s
        self._lock = threading.RLock()
        self._sequence = itertools.count()
        self._pods: dict[str, Json] = {}
        """uid -> the pod as last listed: what lets a deletion be noticed."""
        self._replaced = _Recent()
        self._killed = _Recent()
        self._replicasets_seen: set[tuple[str, str]] = set()
        self._attempts: dict[str, _Attempt] = {}
        self._deleted: list[Json] = []
        self._deleted_lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self._pods = {_uid(p): p for p in self._list(_PODS)}

    # ---- running ------------------------------------------------------------------------

    def __enter__(self) -> Controllers:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def start(self) -> None:
        """Follow the watch history in background threads; reconcile after each burst."""
        if self.running:
            return
        self._stop.clear()
        since = self.store.resource_version
        self._threads = [
            threading.Thread(
                target=self._follow,
                args=(resource, since),
                name=f"sim-controllers-{resource.plural}",
                daemon=True,
            )
            for resource in _FOLLOWED
        ]
        self._threads.append(
            threading.Thread(target=self._loop, name="sim-controllers", daemon=True)
        )
        for thread in self._threads:
            thread.start()
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout)
        self._threads = []

    def _follow(self, resource: ResourceType, since: int) -> None:
        cursor = since
        while not self._stop.is_set():
            try:
                for event in self.store.watch(resource, "", cursor, stop=self._stop):
                    cursor = event.resource_version
                    if resource is _PODS and event.type == "DELETED":
                        with self._deleted_lock:
                            self._deleted.append(event.object)
                    self._wake.set()
            except ApiError as exc:  # 410 Gone: the level-based round catches up
                log.debug("sim controllers: %s watch restarts: %s", resource.plural, exc.message)
                cursor = self.store.resource_version
                self._wake.set()
            except Exception:
                log.exception("sim controllers: %s watch failed", resource.plural)
                self._stop.wait(1.0)
                cursor = self.store.resource_version
                self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self._wake.wait(self._resync_s):
                self._wake.clear()
                # Let a burst (a fault's several writes, a drain) land before acting on it.
                settle_until = time.monotonic() + 20 * self._settle_s
                while time.monotonic() < settle_until and self._wake.wait(self._settle_s):
                    self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.reconcile()
            except Exception:
                log.exception("sim controllers: reconcile failed")

    # ---- one round ----------------------------------------------------------------------

    def reconcile(self, max_passes: int = 10) -> list[str]:
        """Run every controller until nothing changes (at most `max_passes` passes).

        Returns what changed, one line per change, for people and tests."""
        with self._lock:
            changes: list[str] = []
            for _ in range(max_passes):
                done = self._pass()
                if not done:
                    break
                changes += done
            return changes

    def _pass(self) -> list[str]:
        now = self._now()
        changes: list[str] = []
        stages: tuple[Callable[[list[Json], datetime], list[str]], ...] = (
            self._lost_pods,
            self._replicasets,
            self._daemonsets,
            self._schedule,
            self._start_pods,
        )
        pods = self._list(_PODS)
        for stage in stages:
            done = stage(pods, now)
            if done:
                changes += done
                pods = self._list(_PODS)
        return changes

    def _list(self, resource: ResourceType) -> list[Json]:
        items, _ = self.store.list(resource, "")
        return items

    # ---- kubelet's Killing, Job and implicit ReplicaSet replacements ----------------------

    def _lost_pods(self, pods: list[Json], now: datetime) -> list[str]:
        current = {_uid(p): p for p in pods}
        self._replicasets_seen |= {
            (namespace_of(rs), name_of(rs)) for rs in self._list(_REPLICASETS)
        }
        with self._deleted_lock:
            deleted, self._deleted = self._deleted, []
        # A deleted pod as the watch last showed it, else as the previous round listed it.
        last_seen = {uid: p for uid, p in self._pods.items() if uid not in current}
        last_seen.update({_uid(p): p for p in deleted if _uid(p) not in current})
        gone = list(last_seen.values())
        self._pods = current
        _forget_logs(self.store, {_uid(p) for p in gone})
        changes: list[str] = []
        leaving = gone + [p for p in pods if _terminating(p)]
        for pod in leaving:
            changes += self._killing(pod, now)
        lost = leaving + [p for p in pods if _phase(p) == "Failed" and not _terminating(p)]
        for pod in lost:
            changes += self._replace(pod, now)
        return changes

    def _killing(self, pod: Json, now: datetime) -> list[str]:
        uid, node = _uid(pod), _spec(pod).get("nodeName")
        if not node or _phase(pod) != "Running" or uid in self._killed:
            return []
        self._killed.add(uid)
        for container in _spec(pod).get("containers") or []:
            name = str(container.get("name", ""))
            self._emit(
                pod,
                "Normal",
                "Killing",
                f"Stopping container {name}",
                now,
                component="kubelet",
                host=str(node),
                field_path=f"spec.containers{{{name}}}",
            )
        return [f"{namespace_of(pod)}/{name_of(pod)}: kubelet on {node} stops its containers"]

    def _replace(self, pod: Json, now: datetime) -> list[str]:
        uid, ref = _uid(pod), _controller_ref(pod)
        if ref is None or uid in self._replaced:
            return []
        kind, owner = str(ref.get("kind", "")), str(ref.get("name", ""))
        if kind == "Job":
            if _phase(pod) == "Succeeded":
                return []
        elif kind == "ReplicaSet":
            if (namespace_of(pod), owner) in self._replicasets_seen:
                return []  # the ReplicaSet object itself decides, level-based
        else:
            return []
        self._replaced.add(uid)
        created = self._create_pod(namespace_of(pod), _replacement(pod, owner), ref, now)
        return [
            f"{namespace_of(pod)}/{name_of(pod)} lost: {kind} {owner} created {name_of(created)}"
        ]

    def _create_pod(self, namespace: str, body: Json, owner: Json, now: datetime) -> Json:
        created = self.store.create(_PODS, namespace, body)
        self._pods[_uid(created)] = created
        component = {
            "Job": "job-controller",
            "ReplicaSet": "replicaset-controller",
            "DaemonSet": "daemonset-controller",
        }.get(str(owner.get("kind")), "controller-manager")
        self._emit(
            {
                "apiVersion": owner.get("apiVersion", "apps/v1"),
                "kind": owner.get("kind", ""),
                "metadata": {
                    "name": owner.get("name", ""),
                    "namespace": namespace,
                    "uid": owner.get("uid", ""),
                },
            },
            "Normal",
            "SuccessfulCreate",
            f"Created pod: {name_of(created)}",
            now,
            component=component,
        )
        return created

    # ---- ReplicaSet objects -------------------------------------------------------------

    def _replicasets(self, pods: list[Json], now: datetime) -> list[str]:
        changes: list[str] = []
        for rs in self._list(_REPLICASETS):
            if _terminating(rs):
                continue
            owned = [p for p in pods if _owned_by(p, "ReplicaSet", rs)]
            active = [p for p in owned if not _terminating(p) and _phase(p) not in _FINISHED]
            wanted = int(_spec(rs).get("replicas", 1))
            ref = _owner_ref(rs)
            for _ in range(wanted - len(active)):
                body = _from_template(rs, owned)
                created = self._create_pod(namespace_of(rs), body, ref, now)
                changes.append(f"ReplicaSet {name_of(rs)} created {name_of(created)}")
                active.append(created)
            if len(active) > wanted:
                # The controller deletes unscheduled, then pending, then not ready, newest first.
                surplus = sorted(
                    active,
                    key=lambda p: (
                        bool(_spec(p).get("nodeName")),
                        _phase(p) == "Running",
                        _ready(p),
                        "~" + str(_meta(p).get("creationTimestamp", "")),
                    ),
                )[: len(active) - wanted]
                for pod in surplus:
                    self._delete_pod(pod, rs, now)
                    active.remove(pod)
                    changes.append(f"ReplicaSet {name_of(rs)} deleted {name_of(pod)}")
            status = {
                "replicas": len(active),
                "fullyLabeledReplicas": len(active),
                "readyReplicas": sum(1 for p in active if _ready(p)),
                "availableReplicas": sum(1 for p in active if _ready(p)),
                "observedGeneration": _meta(rs).get("generation", 1),
            }
            if self._update_status(_REPLICASETS, rs, status):
                changes.append(f"ReplicaSet {name_of(rs)} status {status}")
        return changes

    def _delete_pod(self, pod: Json, owner: Json, now: datetime) -> None:
        try:
            self.store.delete(_PODS, namespace_of(pod), name_of(pod))
        except ApiError:
            return
        self._emit(
            owner,
            "Normal",
            "SuccessfulDelete",
            f"Deleted pod: {name_of(pod)}",
            now,
            component="daemonset-controller"
            if owner.get("kind") == "DaemonSet"
            else "replicaset-controller",
        )

    def _update_status(self, resource: ResourceType, obj: Json, wanted: Json) -> bool:
        """Write `status` only when a field differs (an omitted omitempty field counts as 0)."""
        current = _status(obj)
        if all(current.get(k, 0 if k in _OMIT_EMPTY else None) == v for k, v in wanted.items()):
            return False
        body = copy.deepcopy(obj)
        body["status"] = {**current, **wanted}
        for key in _OMIT_EMPTY:
            if body["status"].get(key) == 0:
                del body["status"][key]
        try:
            self.store.replace(resource, namespace_of(obj), name_of(obj), body)
        except ApiError:
            return False
        return True

    # ---- DaemonSets ---------------------------------------------------------------------

    def _daemonsets(self, pods: list[Json], now: datetime) -> list[str]:
        nodes = self._list(_NODES)
        changes: list[str] = []
        for ds in self._list(_DAEMONSETS):
            if _terminating(ds):
                continue
            owned = [p for p in pods if _owned_by(p, "DaemonSet", ds)]
            by_node: dict[str, list[Json]] = defaultdict(list)
            for pod in owned:
                if _terminating(pod):
                    continue
                if _phase(pod) == "Failed":
                    self._delete_pod(pod, ds, now)
                    changes.append(f"DaemonSet {name_of(ds)} deleted failed {name_of(pod)}")
                    continue
                by_node[_daemon_target(pod)].append(pod)
            template = (_spec(ds).get("template") or {}).get("spec") or {}
            desired = scheduled = misscheduled = ready = 0
            for node in nodes:
                node_name = name_of(node)
                should_run, keep = _daemon_fits(template, node)
                live = sorted(by_node.pop(node_name, []), key=_keep_order)
                desired += should_run
                if should_run and not live:
                    body = _daemon_pod(ds, node_name, owned, now)
                    created = self._create_pod(namespace_of(ds), body, _owner_ref(ds), now)
                    changes.append(
                        f"DaemonSet {name_of(ds)} created {name_of(created)} for {node_name}"
                    )
                    live = [created]
                elif live and not keep:
                    for pod in live:
                        self._delete_pod(pod, ds, now)
                        changes.append(
                            f"DaemonSet {name_of(ds)} deleted {name_of(pod)} from {node_name}"
                        )
                    live = []
                for pod in live[1:]:
                    self._delete_pod(pod, ds, now)
                    changes.append(f"DaemonSet {name_of(ds)} deleted duplicate {name_of(pod)}")
                if live:
                    scheduled += should_run
                    misscheduled += not should_run
                    ready += should_run and _ready(live[0])
            for node_name, orphans in by_node.items():
                for pod in orphans:
                    self._delete_pod(pod, ds, now)
                    changes.append(
                        f"DaemonSet {name_of(ds)} deleted {name_of(pod)} (node {node_name} gone)"
                    )
            status = {
                "desiredNumberScheduled": desired,
                "currentNumberScheduled": scheduled,
                "updatedNumberScheduled": scheduled,
                "numberMisscheduled": misscheduled,
                "numberReady": ready,
                "numberAvailable": ready,
                "numberUnavailable": desired - ready,
                "observedGeneration": _meta(ds).get("generation", 1),
            }
            if self._update_status(_DAEMONSETS, ds, status):
                changes.append(f"DaemonSet {name_of(ds)} status {desired} desired, {ready} ready")
        return changes

    # ---- the scheduler ------------------------------------------------------------------

    def _schedule(self, pods: list[Json], now: datetime) -> list[str]:
        nodes = self._list(_NODES)
        infos = {name_of(node): _NodeInfo.build(node) for node in nodes}
        for pod in pods:
            node = _spec(pod).get("nodeName")
            if node in infos and _phase(pod) not in _FINISHED:
                infos[str(node)].add(pod)
        waiting = sorted(
            (
                p
                for p in pods
                if not _spec(p).get("nodeName")
                and not _terminating(p)
                and _phase(p) == "Pending"
                and (_spec(p).get("schedulerName") or SCHEDULER) == SCHEDULER
                and not _spec(p).get("schedulingGates")
            ),
            key=lambda p: (-_priority(p), str(_meta(p).get("creationTimestamp", "")), name_of(p)),
        )
        live = {_uid(p) for p in pods}
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
                    self._attempts.pop(_uid(pod), None)
                    changes.append(f"{namespace_of(pod)}/{name_of(pod)} bound to {best.name}")
                continue
            message = self._fit_error(pod, requests, infos, statuses)
            changes += self._unschedulable(pod, message, now)
        return changes

    def _filter(self, pod: Json, requests: Mapping[str, int], info: _NodeInfo) -> _Status | None:
        """The default profile's Filter plugins in order; the first failure decides."""
        spec = _spec(pod)
        tolerations = [t for t in spec.get("tolerations") or [] if isinstance(t, dict)]
        if _spec(info.node).get("unschedulable") and not any(
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
        if _spec(pod).get("preemptionPolicy") == "Never":
            return f"{message} preemption: {MSG_PREEMPT_NEVER}"
        priority = _priority(pod)
        preemption: list[_Status] = []
        for name, status in statuses.items():
            if status.code == _UNRESOLVABLE:
                preemption.append(_Status(_UNRESOLVABLE, (MSG_NOT_HELPFUL,)))
                continue
            info = infos[name]
            victims = [p for p in info.pods if _priority(p) < priority]
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
        self._emit(
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
        condition = _condition(pod, "PodScheduled")
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
        uid = _uid(pod)
        attempt = self._attempts.get(uid)
        if attempt is None or attempt.message != message:
            attempt = self._recorded_attempt(pod, message)
        if attempt is not None and now - attempt.at < UNSCHEDULABLE_RETRY:
            self._attempts[uid] = attempt
            return changes
        event = self._repeat(pod, attempt, now) if attempt is not None else None
        if event is None:
            event = self._emit(pod, "Warning", "FailedScheduling", message, now)
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
            if involved.get("uid") != _uid(pod) or event.get("message") != message:
                continue
            if event.get("reportingComponent") != SCHEDULER:
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
            "lastObservedTime": _micro(now),
        }
        try:
            return self.store.replace(_EVENTS, namespace_of(pod), attempt.event, event)
        except ApiError:
            return None

    # ---- kubelet: start what was bound --------------------------------------------------

    def _start_pods(self, pods: list[Json], now: datetime) -> list[str]:
        nodes = {name_of(n): n for n in self._list(_NODES)}
        admitted: dict[str, list[Json]] = defaultdict(list)
        for pod in pods:
            if _spec(pod).get("nodeName") and _phase(pod) == "Running":
                admitted[str(_spec(pod)["nodeName"])].append(pod)
        changes: list[str] = []
        for pod in pods:
            node = nodes.get(str(_spec(pod).get("nodeName") or ""))
            if node is None or _phase(pod) != "Pending" or _terminating(pod):
                continue
            if _node_ready(node) != "True":
                continue
            where = f"{namespace_of(pod)}/{name_of(pod)}"
            body = copy.deepcopy(pod)
            rejection = _admission_failure(pod, node, admitted[name_of(node)])
            if rejection is not None:
                reason, message = rejection
                body["status"] = _rejected_status(pod, reason, message)
                if self._write_status(body):
                    self._emit(
                        body,
                        "Warning",
                        reason,
                        message,
                        now,
                        component="kubelet",
                        host=name_of(node),
                    )
                    changes.append(f"{where} rejected by the kubelet on {name_of(node)}: {reason}")
                continue
            if _runs_to_completion(pod):
                exits = {}
                for container in _spec(pod).get("containers") or []:
                    code, output = _nvidia_smi(self.store, container, node)
                    exits[str(container.get("name", ""))] = code
                    _keep_log(self.store, pod, str(container.get("name", "")), output)
                body["status"] = _finished_status(pod, node, now, exits)
                if self._write_status(body):
                    changes.append(
                        f"{where} ran nvidia-smi -L on {name_of(node)}: {body['status']['phase']}"
                    )
                continue
            body["status"] = _running_status(pod, node, now)
            if self._write_status(body):
                admitted[name_of(node)].append(body)
                changes.append(f"{where} running on {name_of(node)}")
        return changes

    def _write_status(self, pod: Json) -> bool:
        try:
            self.store.replace(_PODS, namespace_of(pod), name_of(pod), pod)
        except ApiError:
            return False
        return True

    # ---- events -------------------------------------------------------------------------

    def _emit(
        self,
        involved: Json,
        type_: str,
        reason: str,
        message: str,
        now: datetime,
        *,
        component: str = SCHEDULER,
        host: str | None = None,
        action: str = "Scheduling",
        field_path: str | None = None,
    ) -> Json:
        namespace = namespace_of(involved) or "default"
        name = name_of(involved)
        nanos = int(now.timestamp() * 1e9) + next(self._sequence)
        reference: Json = {
            "apiVersion": involved.get("apiVersion", "v1"),
            "kind": involved.get("kind", "Pod"),
            "name": name,
            "namespace": namespace_of(involved),
            "uid": _uid(involved),
        }
        if _meta(involved).get("resourceVersion"):
            reference["resourceVersion"] = _meta(involved)["resourceVersion"]
        if field_path:
            reference["fieldPath"] = field_path
        body: Json = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{nanos:x}", "namespace": namespace},
            "involvedObject": reference,
            "reason": reason,
            "message": message,
            "type": type_,
        }
        if component == SCHEDULER:
            # events.k8s.io/v1 as the core/v1 API shows it: no source, count or timestamps.
            body.update(
                {
                    "action": action,
                    "eventTime": _micro(now),
                    "firstTimestamp": None,
                    "lastTimestamp": None,
                    "reportingComponent": SCHEDULER,
                    "reportingInstance": self._scheduler_instance,
                    "source": {},
                }
            )
        else:
            source: Json = {"component": component}
            if host:
                source["host"] = host
            body.update(
                {
                    "count": 1,
                    "eventTime": None,
                    "firstTimestamp": ts(now),
                    "lastTimestamp": ts(now),
                    "reportingComponent": component,
                    "reportingInstance": host or "",
                    "source": source,
                }
            )
        try:
            return self.store.create(_EVENTS, namespace, body)
        except ApiError:
            body["metadata"]["name"] = f"{name}.{uuid.uuid4().hex[:16]}"
            return self.store.create(_EVENTS, namespace, body)


# ---- object builders ------------------------------------------------------------------------


def _ready(pod: Json) -> bool:
    condition = _condition(pod, "Ready")
    return _phase(pod) == "Running" and condition is not None and condition.get("status") == "True"


def _keep_order(pod: Json) -> tuple[bool, str, str]:
    """Which of several daemon pods on a node stays: a ready one, then the oldest."""
    return (not _ready(pod), str(_meta(pod).get("creationTimestamp", "")), name_of(pod))


def _owner_ref(owner: Json) -> Json:
    return {
        "apiVersion": owner.get("apiVersion", "apps/v1"),
        "kind": owner.get("kind", ""),
        "name": name_of(owner),
        "uid": _uid(owner),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _fresh_volumes(spec: Json) -> None:
    """The ServiceAccount admission plugin names the token volume per pod."""
    suffix = uuid.uuid4().hex[:5]
    renamed: dict[str, str] = {}
    for volume in spec.get("volumes") or []:
        name = str(volume.get("name", ""))
        if name.startswith("kube-api-access-"):
            renamed[name] = f"kube-api-access-{suffix}"
            volume["name"] = renamed[name]
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        for mount in container.get("volumeMounts") or []:
            if mount.get("name") in renamed:
                mount["name"] = renamed[mount["name"]]


def _replacement(old: Json, owner: str) -> Json:
    """What the Job / ReplicaSet controller creates in place of a lost pod."""
    meta = _meta(old)
    metadata: Json = {
        "generateName": f"{owner}-",
        "labels": dict(labels_of(old)),
        "ownerReferences": copy.deepcopy(meta.get("ownerReferences") or []),
    }
    if meta.get("annotations"):
        metadata["annotations"] = copy.deepcopy(meta["annotations"])
    spec = copy.deepcopy(_spec(old))
    spec.pop("nodeName", None)
    _fresh_volumes(spec)
    status: Json = {"phase": "Pending"}
    if _status(old).get("qosClass"):
        status["qosClass"] = _status(old)["qosClass"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def _from_template(owner: Json, siblings: list[Json]) -> Json:
    """A pod from `spec.template`; a template without containers borrows a sibling's spec."""
    template = copy.deepcopy(_spec(owner).get("template") or {})
    template_meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    if not spec.get("containers"):
        base = _base_spec(owner, siblings)
        spec = {**base, **spec}
    spec.pop("nodeName", None)
    spec.setdefault("schedulerName", SCHEDULER)
    _fresh_volumes(spec)
    metadata: Json = {
        "generateName": f"{name_of(owner)}-",
        "labels": dict(template_meta.get("labels") or {}),
        "ownerReferences": [_owner_ref(owner)],
    }
    if template_meta.get("annotations"):
        metadata["annotations"] = dict(template_meta["annotations"])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def _generation(pod: Json) -> int:
    value = labels_of(pod).get("pod-template-generation", "")
    return int(value) if value.isdigit() else 0


def _base_spec(owner: Json, siblings: list[Json]) -> Json:
    newest = max(
        siblings,
        key=lambda p: (_generation(p), str(_meta(p).get("creationTimestamp", ""))),
        default=None,
    )
    if newest is not None:
        spec = copy.deepcopy(_spec(newest))
        spec.pop("nodeName", None)
        spec.pop("affinity", None)
        return spec
    name = name_of(owner)
    image = (
        f"nvcr.io/nvidia/{name}:v24.3.0"
        if namespace_of(owner) == GPU_OPERATOR_NS
        else "registry.k8s.io/pause:3.9"
    )
    return {
        "containers": [
            {
                "name": name,
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "resources": {},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            }
        ],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "restartPolicy": "Always",
        "schedulerName": SCHEDULER,
        "securityContext": {},
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
    }


def _daemon_target(pod: Json) -> str:
    """util.GetTargetNodeName: nodeName, else the controller's metadata.name affinity."""
    spec = _spec(pod)
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in required.get("nodeSelectorTerms") or []:
        for requirement in term.get("matchFields") or []:
            values = requirement.get("values") or []
            if requirement.get("key") == "metadata.name" and len(values) == 1:
                return str(values[0])
    return ""


def _daemon_tolerations(template: Json) -> list[Json]:
    tolerations = [t for t in template.get("tolerations") or [] if isinstance(t, dict)]
    for default in _DAEMON_TOLERATIONS:
        if not any(
            t.get("key") == default["key"] and t.get("effect") == default["effect"]
            for t in tolerations
        ):
            tolerations.append(dict(default))
    return tolerations


def _daemon_fits(template: Json, node: Json) -> tuple[bool, bool]:
    """(should run, should continue running), as the DaemonSet controller's predicates say."""
    if not node_affinity_matches(template, node):
        return False, False
    taints = [t for t in _spec(node).get("taints") or [] if isinstance(t, dict)]
    tolerations = _daemon_tolerations(template)
    if untolerated_taint(taints, tolerations) is None:
        return True, True
    return False, untolerated_taint(taints, tolerations, ("NoExecute",)) is None


def _daemon_pod(ds: Json, node: str, siblings: list[Json], now: datetime) -> Json:
    body = _from_template(ds, siblings)
    spec = body["spec"]
    spec["tolerations"] = _daemon_tolerations(spec)
    affinity = spec.setdefault("affinity", {})
    affinity["nodeAffinity"] = {
        **(affinity.get("nodeAffinity") or {}),
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
    }
    newest = [p for p in siblings if labels_of(p).get("controller-revision-hash")]
    template_hash = _short_hash(name_of(ds), repr(_spec(ds).get("template")))
    generation = str(_meta(ds).get("generation", 1))
    if newest:
        latest = max(newest, key=_generation)
        template_hash = labels_of(latest)["controller-revision-hash"]
        generation = labels_of(latest).get("pod-template-generation", generation)
    body["metadata"]["labels"].update(
        {"controller-revision-hash": template_hash, "pod-template-generation": generation}
    )
    return body


def _pod_ip(pod: Json, now: datetime) -> str:
    digest = hashlib.sha256(f"{namespace_of(pod)}/{name_of(pod)}/{ts(now)}".encode()).digest()
    return f"10.{digest[0] % 64 + 128}.{digest[1]}.{digest[2] % 250 + 2}"


def _node_ip(node: Json) -> str:
    for address in _status(node).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address.get("address", ""))
    return ""


def _running_status(pod: Json, node: Json, now: datetime) -> Json:
    """What the kubelet reports once the pod's containers run."""
    spec, old = _spec(pod), _status(pod)
    moment = ts(now)
    scheduled = _condition(pod, "PodScheduled") or {}
    conditions = [
        {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": moment}
        for kind in _POD_CONDITIONS
    ]
    conditions.append(
        {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": scheduled.get("lastTransitionTime") or moment,
        }
    )
    host_ip, pod_ip = _node_ip(node), _pod_ip(pod, now)
    status: Json = {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}] if host_ip else [],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": moment,
        "containerStatuses": [
            _container_status(pod, c, {"running": {"startedAt": moment}}, now)
            for c in spec.get("containers") or []
        ],
        "qosClass": old.get("qosClass") or _qos(pod),
    }
    if spec.get("initContainers"):
        status["initContainerStatuses"] = [
            _container_status(
                pod,
                c,
                {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": moment,
                        "finishedAt": moment,
                    }
                },
                now,
                ready=False,
            )
            for c in spec["initContainers"]
        ]
    return status


def _container_status(
    pod: Json, container: Json, state: Json, now: datetime, ready: bool = True
) -> Json:
    name, image = str(container.get("name", "")), str(container.get("image", ""))
    return {
        "name": name,
        "image": image,
        "imageID": f"{image.split(':')[0]}@sha256:{hashlib.sha256(image.encode()).hexdigest()}",
        "containerID": "containerd://"
        + hashlib.sha256(f"{_uid(pod)}/{name}/{ts(now)}".encode()).hexdigest(),
        "ready": ready,
        "started": ready,
        "restartCount": 0,
        "state": state,
        "lastState": {},
    }


def _qos(pod: Json) -> str:
    containers = _spec(pod).get("containers") or []
    requests = [(c.get("resources") or {}).get("requests") or {} for c in containers]
    limits = [(c.get("resources") or {}).get("limits") or {} for c in containers]
    if not any(requests) and not any(limits):
        return "BestEffort"
    guaranteed = all(
        lim.get(r) is not None and (req.get(r) is None or req.get(r) == lim.get(r))
        for req, lim in zip(requests, limits, strict=True)
        for r in ("cpu", "memory")
    )
    return "Guaranteed" if guaranteed else "Burstable"


# ---- the kubelet's admission, and the one program it plays ----------------------------------


def _extended(resource: str) -> bool:
    return "/" in resource and not resource.startswith("kubernetes.io/")


def _admission_failure(pod: Json, node: Json, admitted: list[Json]) -> tuple[str, str] | None:
    """(reason, message) when the kubelet would reject `pod`, given the pods it already runs.

    The device manager's admit handler runs before the predicate check: a resource a device
    plugin registered (capacity above 0) fails there (`UnexpectedAdmissionError`), an
    unregistered one (capacity 0) in the predicate check (`OutOf<resource>`); a resource the
    node does not list is dropped from the request first (removeMissingExtendedResources)."""
    requests = {r: n for r, n in pod_requests(pod).items() if _extended(r)}
    if not requests:
        return None
    status = _status(node)
    capacity = status.get("capacity") or {}
    allocatable = status.get("allocatable") or {}
    used: dict[str, int] = defaultdict(int)
    for other in admitted:
        for resource, amount in pod_requests(other).items():
            used[resource] += amount
    for resource in sorted(requests):
        if resource not in capacity and resource not in allocatable:
            continue
        wanted = requests[resource]
        offered = quantity(allocatable.get(resource, 0))
        if quantity(capacity.get(resource, 0)) > 0:
            if offered == 0:
                return "UnexpectedAdmissionError", (
                    "Allocate failed due to no healthy devices present; cannot allocate "
                    f"unhealthy devices {resource}, which is unexpected"
                )
            free = max(0, offered - used[resource])
            if wanted > free:
                return "UnexpectedAdmissionError", (
                    f"Allocate failed due to requested number of devices unavailable for "
                    f"{resource}. Requested: {wanted}, Available: {free}, which is unexpected"
                )
        elif wanted > offered - used[resource]:
            return f"OutOf{resource}", (
                f"Node didn't have enough resource: {resource}, requested: {wanted}, "
                f"used: {used[resource]}, capacity: {offered}"
            )
    return None


def _rejected_status(pod: Json, reason: str, message: str) -> Json:
    """kubelet.rejectPod: Failed, with the admission failure as reason and message."""
    status: Json = {
        "phase": "Failed",
        "reason": reason,
        "message": f"Pod was rejected: {message}",
        "qosClass": _status(pod).get("qosClass") or _qos(pod),
    }
    if _status(pod).get("conditions"):
        status["conditions"] = copy.deepcopy(_status(pod)["conditions"])
    return status


def _runs_to_completion(pod: Json) -> bool:
    """A `restartPolicy: Never` pod whose every container runs `nvidia-smi -L`."""
    spec = _spec(pod)
    containers = spec.get("containers") or []
    if spec.get("restartPolicy") != "Never" or not containers or spec.get("initContainers"):
        return False
    return all(_NVIDIA_SMI_LIST.search(" ".join(_argv(c))) for c in containers)


def _argv(container: Json) -> list[str]:
    return [str(a) for a in [*(container.get("command") or []), *(container.get("args") or [])]]


def _driver_loaded(store: ClusterState, node: Json) -> bool:
    """A driver the GPU Operator deploys is loaded while its pod is Running and Ready; a node
    without `nvidia.com/gpu.deploy.driver=true` has its driver on the host."""
    if labels_of(node).get("nvidia.com/gpu.deploy.driver") != "true":
        return True
    drivers, _ = store.list(
        _PODS, GPU_OPERATOR_NS, f"app={DRIVER_APP}", f"spec.nodeName={name_of(node)}"
    )
    return any(pod_ready(p) and not _terminating(p) for p in drivers)


def _node_gpus(node: Json) -> int:
    label = labels_of(node).get("nvidia.com/gpu.count", "")
    if label.isdigit():
        return int(label)
    return quantity((_status(node).get("capacity") or {}).get(GPU_RESOURCE, 0))


def _visible_gpus(store: ClusterState, container: Json, node: Json) -> list[int]:
    """Host indices of the GPUs the container runtime hands the container."""
    count = _node_gpus(node)
    env = {
        str(e.get("name")): str(e.get("value") or "")
        for e in container.get("env") or []
        if isinstance(e, dict)
    }
    wanted = env.get("NVIDIA_VISIBLE_DEVICES")
    if wanted == "all":
        return list(range(count))
    if wanted in ("none", "void"):
        return []
    requested = container_requests(container).get(GPU_RESOURCE, 0)
    states = gpu_state(store).get(name_of(node), {})
    healthy = [i for i in range(count) if states.get(i, {}).get("healthy", True)]
    return healthy[:requested]


def _nvidia_smi(store: ClusterState, container: Json, node: Json) -> tuple[int, str]:
    """`nvidia-smi -L` in `container` on `node`: its exit code and what it printed."""
    if not _driver_loaded(store, node):
        return _SMI_DRIVER_NOT_LOADED, NVIDIA_SMI_NO_DRIVER + "\n"
    visible = _visible_gpus(store, container, node)
    if not visible:
        return _SMI_NOT_FOUND, "No devices found.\n"
    name = name_of(node)
    model = model_name(labels_of(node).get("nvidia.com/gpu.product", ""))
    states = gpu_state(store).get(name, {})
    code, lines = 0, []
    for index, host_index in enumerate(visible):
        if states.get(host_index, {}).get("xid") == XID_FELL_OFF_BUS:
            code = _SMI_GPU_LOST
            lines.append(
                f"Unable to determine the device handle for GPU {pci_bus_id(host_index)[4:]}: "
                "GPU is lost.  Reboot the system to recover this GPU"
            )
        else:
            lines.append(f"GPU {index}: {model} (UUID: {gpu_uuid(name, host_index)})")
    return code, "\n".join(lines) + "\n"


def _finished_status(pod: Json, node: Json, now: datetime, exits: Mapping[str, int]) -> Json:
    """What the kubelet reports once every container of a `restartPolicy: Never` pod exited."""
    status = _running_status(pod, node, now)
    phase = "Succeeded" if all(code == 0 for code in exits.values()) else "Failed"
    ended = "PodCompleted" if phase == "Succeeded" else "PodFailed"
    moment = ts(now)
    for condition in status["conditions"]:
        kind = condition["type"]
        if kind == "PodReadyToStartContainers":
            condition["status"] = "False"
        elif kind in ("Ready", "ContainersReady"):
            condition.update(status="False", reason=ended)
        elif kind == "Initialized" and phase == "Succeeded":
            condition["reason"] = ended
    for container_status in status["containerStatuses"]:
        code = exits.get(container_status["name"], 0)
        container_status.update(ready=False, started=False)
        container_status["state"] = {
            "terminated": {
                "exitCode": code,
                "reason": "Completed" if code == 0 else "Error",
                "startedAt": moment,
                "finishedAt": moment,
                "containerID": container_status["containerID"],
            }
        }
    status["phase"] = phase
    return status


_LOGS: weakref.WeakKeyDictionary[ClusterState, dict[tuple[str, str], str]] = (
    weakref.WeakKeyDictionary()
)
_LOGS_LOCK = threading.Lock()


def _keep_log(store: ClusterState, pod: Json, container: str, output: str) -> None:
    with _LOGS_LOCK:
        _LOGS.setdefault(store, {})[(_uid(pod), container)] = output


def _forget_logs(store: ClusterState, uids: set[str]) -> None:
    if not uids:
        return
    with _LOGS_LOCK:
        logs = _LOGS.get(store, {})
        for key in [k for k in logs if k[0] in uids]:
            del logs[key]


def container_log(store: ClusterState, pod: Json, container: str) -> str | None:
    """What `container` of `pod` printed, as the simulated kubelet kept it; None when it kept
    nothing (it runs no program of that pod). Kept by pod uid, as container logs live with the
    pod on its node: a new pod of the same name starts without, and a deleted pod's go."""
    with _LOGS_LOCK:
        return _LOGS.get(store, {}).get((_uid(pod), container))
