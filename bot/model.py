"""The shared nouns of gpubot.

Every stage of the pipeline (sources -> evidence -> diagnose -> chat -> remediate) hands the
next one these values and nothing else. They are plain pydantic models so that each stage
can be called from a test with hand-made input, and so that they serialise the same way to
the CLI's JSON, the store and the chat. This module must never import anything of gpubot.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Stage(StrEnum):
    """Where a node is in its lifecycle: the runbook's first question, step 1."""

    JOIN = "join"
    DRAIN = "drain"
    REBOOT = "reboot"
    UPGRADE = "upgrade"
    MIG = "mig"
    REJOIN = "rejoin"
    STEADY = "steady"


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


class Action(StrEnum):
    CORDON = "cordon"
    DRAIN = "drain"
    UNCORDON = "uncordon"
    NONE = "none"


class Lang(StrEnum):
    ZH = "zh"
    EN = "en"


_FIELDS_SET: dict[tuple[type[BaseModel], frozenset[str]], set[str]] = {}
"""One set of field names per model and combination of fields given, shared by every frozen
model built with those fields (see `_Frozen.model_post_init`)."""
_FIELDS_SETS_MAX = 4096
"""Code gives a handful of combinations per model; stored JSON read back may give others:
past this many, a model keeps its own set (memory bounded whatever comes in)."""


class _Frozen(BaseModel):
    # Each model's validator is built when it is first used, not when gpubot imports it: a
    # command uses a few of these nouns (`gpubot diagnose` no incident, vote or outbox item).
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    def model_post_init(self, context: Any, /) -> None:
        # pydantic gives each instance its own set of the field names it was given: for a
        # fact with thirty fields that set is 2 KiB, more than the values (a node's facts
        # kept between passes were 45 KiB, 17 KiB with the sets shared; 1,000 nodes are
        # kept). A frozen model never adds to it in place: copies copy it first.
        given = self.__pydantic_fields_set__
        key = (type(self), frozenset(given))
        shared = _FIELDS_SET.get(key)
        if shared is None:
            if len(_FIELDS_SET) < _FIELDS_SETS_MAX:
                _FIELDS_SET[key] = given
        elif shared is not given:
            object.__setattr__(self, "__pydantic_fields_set__", shared)


class Signal(_Frozen):
    """One observation from the outside world that something may be wrong."""

    source: Literal["alertmanager", "kube", "sweep", "kernel"]
    """`kernel`: an Xid read from a kernel log (`journalctl -k`, dmesg, a bug report)."""
    name: str
    status: Literal["firing", "resolved"] = "firing"
    node: str | None = None
    gpu: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    fingerprint: str
    group_key: str | None = None
    truncated_alerts: int = 0
    count: int = 1
    """How many firing alerts of this node, name, GPU and Xid this one stands for: the store
    hands a diagnosis one alert per such group (the newest), not thousands alike."""

    @property
    def dedup_key(self) -> str:
        """Same alert, same start: one signal, however often it is delivered."""
        started = self.starts_at.isoformat() if self.starts_at else ""
        return f"{self.source}:{self.fingerprint}:{started}"


BlockerKind = Literal[
    "pdb",
    "daemonset",
    "daemonset-missing",
    "emptydir",
    "no-controller",
    "finalizer",
    "long-grace",
    "terminating",
]


class Blocker(_Frozen):
    """Something that stops `kubectl drain` from finishing, named so a person can act on it."""

    kind: BlockerKind
    pod: str
    namespace: str
    detail: str
    bypass_flag: str | None = None


class PodFacts(_Frozen):
    name: str
    namespace: str
    phase: str
    owner_kind: str | None
    owner_name: str | None
    component: str | None
    """GPU component this pod is (by its labels or owning DaemonSet, in any namespace)."""
    by_gpu_operator: bool = False
    """One of the GPU Operator's own DaemonSets (not a standalone plugin, GKE's, ...)."""
    reason: str | None = None
    """The pod's own status reason (`UnexpectedAdmissionError`, `Evicted`, ...)."""
    message: str | None = None
    gpu_error: str | None = None
    """The GPU failure the pod's messages or events name: gpu-lost, devices-unhealthy,
    devices-unavailable, system-not-ready, no-nvidia-runtime, driver-in-use, nvml-failed."""
    gpu_error_text: str | None = None
    gpu_request: int
    restarts: int
    waiting_reason: str | None
    failing_container: str | None
    """The first container (init containers first) that is waiting or last failed."""
    last_exit_code: int | None
    last_reason: str | None
    """Why that container last terminated (`Error`, `OOMKilled`, ...)."""
    last_message: str | None
    last_restart_s: int | None
    """Seconds since that container last terminated: recent restarts vs old history."""
    failing: bool
    terminating: bool
    finalizers: list[str]
    grace_period_s: int
    emptydir: bool
    mirror: bool
    daemonset: bool
    age_s: int
    must_leave: bool
    """A drain still has to see it gone: not a DaemonSet or mirror pod, and either not
    finished or finished but held by finalizers (kubectl drain waits for those too)."""


class ComponentFacts(_Frozen):
    """The pod of one GPU software component on one node."""

    name: str
    pod: str | None
    present: bool
    phase: str | None
    failing: bool
    waiting_reason: str | None
    failing_container: str | None
    last_reason: str | None
    last_restart_s: int | None
    restarts: int
    deploy_label: bool | None
    """`nvidia.com/gpu.deploy.<component>` on the node: False means removed on purpose."""
    namespace: str | None = None
    """Where its pod is: runbook commands name this namespace."""
    by_gpu_operator: bool = False
    gpu_error: str | None = None
    gpu_error_text: str | None = None


class GpuFacts(_Frozen):
    capacity: int
    allocatable: int
    count_label: int | None
    present_label: bool
    product: str | None
    mig_capacity: dict[str, int]
    mig_allocatable: dict[str, int]

    @property
    def expected(self) -> int:
        """How many GPUs this node should offer: the most any source claims."""
        return max(self.capacity, self.count_label or 0)


class GpuError(_Frozen):
    """A pod saying something about the GPUs of its node."""

    kind: str
    """gpu-lost, devices-unhealthy, devices-unavailable, system-not-ready, no-nvidia-runtime,
    driver-in-use, nvml-failed (`PodFacts.gpu_error`)."""
    pod: str
    """namespace/name"""
    message: str


class XidFacts(_Frozen):
    code: int
    gpu: str | None
    source: str


class NodeFacts(_Frozen):
    """What is known about one node at `observed_at`; durations are seconds before it."""

    name: str
    known: bool = True
    pool: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    ready: ReadyStatus = ""
    conditions: dict[str, str] = Field(default_factory=dict)
    condition_messages: dict[str, str] = Field(default_factory=dict)
    unschedulable: bool = False
    taints: list[str] = Field(default_factory=list)
    cordoned_for_s: int | None = None
    age_s: int | None = None
    since_reboot_s: int | None = None
    since_uncordon_s: int | None = None
    boot_id: str | None = None
    kubelet_version: str | None = None
    runtime_version: str | None = None
    gpu_node: bool = False
    gpu: GpuFacts | None = None
    driver_version: str | None = None
    upgrade_state: str | None = None
    upgrade_for_s: int | None = None
    """How long the driver upgrade has been in its current in-progress state, as far as the
    node shows it (the operator's start-time annotations, or the driver DaemonSet's newer
    revision already running elsewhere); None when nothing tells."""
    mig_config: str | None = None
    mig_state: str | None = None
    deploy_labels: dict[str, bool] = Field(default_factory=dict)
    components: dict[str, ComponentFacts] = Field(default_factory=dict)
    pods: list[PodFacts] = Field(default_factory=list)
    remaining_pods: int = 0
    """Pods a drain would still have to evict (not DaemonSet, mirror or finished)."""
    blockers: list[Blocker] = Field(default_factory=list)
    pods_after_cordon: list[str] = Field(default_factory=list)
    xids: list[XidFacts] = Field(default_factory=list)
    gpu_marker: str | None = None
    """Why this is a GPU node, in words (a label, the instance type, a GPU pod on it)."""
    gpu_errors: list[GpuError] = Field(default_factory=list)
    """GPU failures the node's pods name (a few of each kind)."""
    gpu_faults: list[str] = Field(default_factory=list)
    """GPU fault alerts firing on the node (ECC double-bit, row remap failure, NVLink, Fabric
    Manager), each as the gate names it."""
    gate_failures: list[str] = Field(default_factory=list)
    """Why the runbook's step-9 health gate does not pass now; empty means it passes."""
    events: list[str] = Field(default_factory=list)


ReasonKind = Literal[
    "insufficient-gpu",
    "insufficient-other",
    "untolerated-taint",
    "affinity-selector",
    "quota",
    "unknown-resource",
    "unschedulable",
    "other",
]
ReadyStatus = Literal["True", "False", "Unknown", ""]


class SchedulingReason(_Frozen):
    kind: ReasonKind
    count: int
    text: str


class PendingPod(_Frozen):
    name: str
    namespace: str
    owner: str | None
    requests: dict[str, int]
    pending_s: int
    reasons: list[SchedulingReason]
    message: str | None
    unoffered_resources: list[str]
    """Extended resources requested that no node in the cluster has in its capacity."""
    evicted_from: str | None
    """A cordoned node this pod's controller lost pods on since the cordon, if any."""


class PoolFacts(_Frozen):
    name: str
    nodes: list[str]
    gpu_pool: bool
    driver_versions: dict[str, int]
    upgrade_states: dict[str, int]
    """Nodes per `nvidia.com/gpu-driver-upgrade-state` (absent label: not counted)."""
    gpu_present: int
    """Nodes labelled `nvidia.com/gpu.present=true`."""
    deploy_labelled: int
    """Nodes carrying any `nvidia.com/gpu.deploy.*` label (the GPU Operator manages them)."""


class ClusterFacts(_Frozen):
    observed_at: datetime
    nodes: dict[str, NodeFacts]
    pools: dict[str, PoolFacts]
    pending_pods: list[PendingPod]
    offered_resources: list[str]


def subject(node: str | None, pool: str | None) -> str:
    """What an incident is about: its node, else `pool:NAME`, else `cluster`."""
    if node:
        return node
    return f"pool:{pool}" if pool else "cluster"


class Questions(_Frozen):
    """The runbook's four questions, answered from the facts."""

    registered: str
    gpu_visible: str
    workloads: str
    scope: str


class RunbookStep(_Frozen):
    text: str
    commands: list[str] = Field(default_factory=list)


class Proposal(_Frozen):
    action: Action
    node: str | None
    requires_approval: bool
    force: bool = False


class Diagnosis(_Frozen):
    rule: str
    node: str | None
    pool: str | None
    stage: Stage
    severity: Severity
    title: str
    summary: str
    causes: list[str]
    check_first: str
    questions: Questions
    evidence: list[str]
    blockers: list[Blocker]
    runbook: list[RunbookStep]
    rollback: str
    proposals: list[Proposal]
    expected: bool = False
    """True when the symptom is the planned effect of a change in progress (e.g. MIG)."""
    lang: Lang
    signals: list[str] = Field(default_factory=list)
    """Fingerprints of the signals this diagnosis explains."""

    @property
    def subject(self) -> str:
        """What its incident is about: the node, `pool:NAME`, or `cluster`."""
        return subject(self.node, self.pool)


class ActionRequest(_Frozen):
    """A proposal made into something a person can approve: exactly this action on exactly
    this node, on the facts it was made on (`facts_fingerprint`), until `expires_at`."""

    id: str
    action: Action
    node: str
    requested_by: str
    created_at: datetime
    expires_at: datetime
    facts_fingerprint: str
    facts_seen: dict[str, object] = Field(default_factory=dict)
    """What the fingerprint was made of, to say what changed."""
    incident: str | None = None
    risk: str = ""
    """What acting costs, shown in the approval dialog (e.g. training pods without a recent
    checkpoint)."""
    force: bool = False
    delete_emptydir_data: bool = False
    override_gate: bool = False


class Vote(_Frozen):
    """One person's approval of one request."""

    request_id: str
    approver: str
    at: datetime


RequestStatus = Literal[
    "need-another",
    "approved",
    "not-allowed",
    "expired",
    "duplicate",
    "withdrawn",
    "denied",
    "changed",
    "running",
    "acting",
    "succeeded",
    "refused",
    "failed",
    "dry-run",
]
"""What happened to a request, in the one vocabulary every part speaks: the policy judging a
vote, the answer a person gets, the execution row the store keeps, the chat and the metrics.

A vote: `need-another` (recorded; a second person must agree), `approved` (recorded, and the
votes suffice: it may act), `not-allowed` (this person may not, or not again), `expired`,
`duplicate` (this vote or this execution happened already), `withdrawn` (its incident was
resolved or superseded: no vote can make it act), `denied`. An execution: `running` (claimed,
being checked), `acting` (past every check, writing to the cluster), then `succeeded`,
`refused` (a reason that can clear: the pool's budget, the health gate), `failed` or
`dry-run`; `changed` is a refusal because the node is no longer what the approval saw, and
a new request asks again. The subsets below are the parts of it each step can say."""

Judgement = Literal["need-another", "approved", "not-allowed", "expired"]
"""What the approval policy says of one vote (`bot.approval.policy.decide`)."""

ExecutionOutcome = Literal[
    "running", "acting", "succeeded", "failed", "refused", "dry-run", "denied", "withdrawn"
]
"""What a request's one execution row holds (`bot.acting.executions.TRANSITIONS` says how it
moves): a denial and a withdrawal are rows born finished, so that no later vote can act."""


@dataclass(frozen=True)
class Outcome:
    """What came of a request when someone voted on it or it ran: its status and the sentence
    the person who asked reads."""

    request_id: str
    status: RequestStatus
    message: str
    new_request: ActionRequest | None = None
    """With `changed`: the request that asks again."""
    approvals_needed: int | None = None
    """With `need-another`: how many different people the policy asks to approve the request
    (`bot.approval.policy.approvals_needed`), for whoever shows the count."""
    request: ActionRequest | None = None
    """With `approved`: the request as the vote found it, valid and not decided, so the
    executor need not read it again."""


class IncidentState(StrEnum):
    """Where an incident is; `bot.incidents.lifecycle` says which moves are legal."""

    OPEN = "open"
    DIAGNOSED = "diagnosed"
    AWAITING_APPROVAL = "awaiting_approval"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    EXECUTING = "executing"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RESOLVED = "resolved"


class Incident(_Frozen):
    """One problem on one subject, for its whole life: its rule is the best diagnosis of it
    so far (a better one supersedes it in place)."""

    id: str
    cluster: str
    node: str | None
    """None for a pool- or cluster-wide incident; "" never: unknown nodes are "unknown"."""
    pool: str | None = None
    rule: str
    state: IncidentState
    severity: Severity
    title: str
    opened_at: datetime
    updated_at: datetime
    resolved_at: datetime | None = None
    reopened: int = 0
    """How often it fired again within the reopen window after a resolve (flapping)."""
    parent: str | None = None
    """The pool-wide incident this node incident belongs to."""
    chat_ref: str | None = None
    """Where its message lives in the chat (e.g. Slack `channel/ts`), for threads and updates."""
    held_until: datetime | None = None
    """Its proposals are held until then: a better-informed diagnosis may follow."""

    @property
    def subject(self) -> str:
        """The node, `pool:NAME`, or `cluster` (its diagnoses' `subject`)."""
        return subject(self.node, self.pool)

    absent_since: datetime | None = None
    """Its symptom has not been seen since then; it resolves once that is long enough."""


RecordChange = Literal["new", "reopened", "updated", "superseded"]


class Recorded(_Frozen):
    """What recording a diagnosis did to its incident."""

    incident: Incident
    change: RecordChange
    """new; reopened (came back within the reopen window: the same incident and thread);
    updated (the same story seen again); superseded (a better diagnosis of the same problem
    replaced the incident's rule: `replaced` says which)."""
    replaced: str | None = None


TimelineKind = Literal[
    "signal",
    "diagnosis",
    "state",
    "proposal",
    "approval",
    "denial",
    "action-start",
    "action-progress",
    "action-result",
    "gate",
    "resolve",
    "note",
]


class TimelineEntry(_Frozen):
    """An append-only line of an incident's story: when, who, what, and the data behind it."""

    incident: str
    at: datetime
    actor: str
    """A person's chat id, or "gpubot"."""
    kind: TimelineKind
    text: str
    data: dict[str, object] = Field(default_factory=dict)


OutboxStatus = Literal["pending", "sent", "failed"]


class OutboxItem(_Frozen):
    """One outgoing chat call, kept until the chat accepted it (invariant 8)."""

    id: int
    key: str
    group_key: str
    method: str
    """The chat API method, e.g. Slack's `chat.postMessage` or `chat.update`."""
    payload: dict[str, object]
    refers_to: str | None = None
    status: OutboxStatus = "pending"
    attempts: int = 0
    next_attempt_at: datetime
    last_error: str | None = None
    result: dict[str, object] | None = None
