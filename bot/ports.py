"""The edges of the pipeline as `typing.Protocol`s. The pipeline depends on these; adapters
(the official kubernetes client, later Prometheus, Slack, SQLAlchemy) implement them, and
tests swap in the simulator behind the real adapter rather than patching anything."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from bot.kube_objects import Obj
from bot.model import (
    ActionRequest,
    Diagnosis,
    ExecutionOutcome,
    Incident,
    IncidentState,
    OutboxItem,
    Recorded,
    Signal,
    TimelineEntry,
    Vote,
)

Kind = Literal["Node", "Pod", "Event", "PodDisruptionBudget", "DaemonSet", "ReplicaSet", "Lease"]


class Cluster(Protocol):
    """The Kubernetes API, in plain JSON objects as the API server returns them.

    Errors: `NotFound`, `PermanentError` (other 4xx), `EvictionBlocked` (429 on eviction),
    `TemporaryError` (5xx, timeouts, connection failures).
    """

    def list(
        self, kind: Kind, namespace: str = "", label_selector: str = "", field_selector: str = ""
    ) -> list[Obj]: ...

    def list_versioned(
        self,
        kind: Kind,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        each: Callable[[Obj], None] | None = None,
    ) -> tuple[builtins.list[Obj], str]:
        """The items and the list's resourceVersion, to watch from. With `each`, every item
        is handed to it as its page arrives and none is kept (the list comes back empty): a
        large list is never held whole."""
        ...

    def watch(
        self,
        kind: Kind,
        resource_version: str,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        timeout_s: int = 300,
    ) -> Iterator[tuple[str, Obj]]:
        """(type, object) after `resource_version`, BOOKMARKs included, until the server ends
        the stream; `WatchExpired` when the version is too old, `TemporaryError` when the
        connection breaks."""
        ...

    def get(self, kind: Kind, namespace: str, name: str) -> Obj: ...

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> Obj:
        """A strategic merge patch, as kubectl cordon/label/taint send."""
        ...

    def evict(
        self, namespace: str, name: str, grace_period_s: int | None = None, uid: str = ""
    ) -> None:
        """POST pods/NAME/eviction (policy/v1); PDBs are the server's to enforce. With `uid`,
        the pod of that uid only (DeleteOptions' precondition): `Conflict` when another pod
        now has the name."""
        ...

    def delete_pod(
        self, namespace: str, name: str, grace_period_s: int | None = None, uid: str = ""
    ) -> None:
        """A direct delete: only ever for a drain a person approved with `force`; `uid` as
        for `evict`."""
        ...

    def create(self, kind: Kind, namespace: str, body: Mapping[str, Any]) -> Obj:
        """POST a new object (the health gate's smoke-test pod, the leader Lease);
        `AlreadyExists` (permanent) when the name is taken."""
        ...

    def replace(self, kind: Kind, namespace: str, name: str, body: Mapping[str, Any]) -> Obj:
        """PUT with the body's resourceVersion as precondition: `Conflict` when someone
        wrote in between (Lease renewals depend on it)."""
        ...

    def pod_log(self, namespace: str, name: str, container: str | None = None) -> str: ...


Sample = tuple[dict[str, str], float]
"""One series of an instant vector: its labels and its value."""


class Metrics(Protocol):
    """Prometheus' HTTP query API. Errors: `TemporaryError` when Prometheus is down, slow
    (past `timeout_s`) or answers 5xx; `PermanentError` for a query it rejects (4xx)."""

    def query(
        self, promql: str, at: datetime | None = None, timeout_s: float = 5.0
    ) -> list[Sample]:
        """An instant query; a scalar answer comes back as one sample without labels."""
        ...


class Execution(Protocol):
    @property
    def request_id(self) -> str: ...
    @property
    def executor(self) -> str: ...
    @property
    def started_at(self) -> datetime: ...
    @property
    def finished_at(self) -> datetime | None: ...
    @property
    def outcome(self) -> ExecutionOutcome: ...
    @property
    def detail(self) -> str: ...
    @property
    def heartbeat_at(self) -> datetime | None: ...


@dataclass(frozen=True)
class SplitDeliveries:
    """What one `SignalStore.split_deliveries` took and stored."""

    deliveries: int
    signals: list[Signal]  # new to the store, in the order they were delivered
    duplicates: int  # signals the store already had
    dropped: int  # deliveries that could not be split: quarantined (kept, never split again)
    quarantined: list[tuple[int, str]] = field(default_factory=list)
    """(delivery id, why) of each delivery this split quarantined."""


@dataclass(frozen=True)
class FiringKind:
    """Alerts of one node, name, GPU and Xid that fire now: how many, and the newest's id."""

    node: str | None
    firing: int
    newest: int


@dataclass(frozen=True)
class QuarantinedDelivery:
    """A webhook delivery that could not be split: kept as received, passed over since."""

    id: int
    source: str
    received_at: datetime
    quarantined_at: datetime
    reason: str


class SignalStore(Protocol):
    """What came in: webhook deliveries kept as received, and the signals split from them,
    each kept once (invariant 8). The webhook and the inbox need nothing else of the store."""

    def add_signals(self, signals: Sequence[Signal], received_at: datetime) -> list[bool]:
        """Keeps each signal once (by fingerprint, status and start): True where it was new."""
        ...

    def add_delivery(self, source: str, body: bytes, received_at: datetime) -> int:
        """Keeps a webhook body as received, to be split into signals later: the one write
        a webhook waits for."""
        ...

    def add_deliveries(self, new: Sequence[tuple[str, bytes, datetime]]) -> list[int]:
        """`add_delivery` for several (source, body, received_at) at once, in one
        transaction: all stored, or none."""
        ...

    def split_deliveries(
        self,
        split: Callable[[str, bytes], Sequence[Signal]],
        limit: int = 200,
        max_bytes: int = 2 * 1024 * 1024,
    ) -> SplitDeliveries:
        """Turns up to `limit` stored deliveries, oldest first, with at most `max_bytes` of
        bodies (at least one delivery), into signals (`add_signals`' dedup) and forgets them,
        in one transaction: each is split exactly once. One that
        cannot be split (`split` raises, or the database refuses its signals) is quarantined
        instead, and never holds up the ones behind it."""
        ...

    def deliveries_waiting(self) -> int:
        """Deliveries stored and not yet split (quarantined ones are not waiting)."""
        ...

    def quarantined_deliveries(self, limit: int = 100) -> list[QuarantinedDelivery]:
        """Deliveries set aside because they could not be split, oldest first."""
        ...

    def firing_kinds(
        self, node: str | None = None, per_node: int = 64, limit: int = 20000
    ) -> list[FiringKind]:
        """The alerts a diagnosis must consider (firing, not resolved since), of every node or
        of `node`, counted per kind (node, name, GPU, Xid), oldest first: one row per kind,
        however many alerts; past `per_node` kinds on a node or `limit` in all, the newest."""
        ...

    def signals_by_id(self, ids: Collection[int]) -> dict[int, Signal]:
        """The stored signals of `ids` (those that exist)."""
        ...

    def firing_alerts(
        self, node: str | None = None, per_node: int = 64, limit: int = 20000
    ) -> list[Signal]:
        """`firing_kinds` as signals: the newest of each kind, its `count` how many fire."""
        ...

    def ping(self) -> None:
        """Raises `StoreUnavailable` when the database does not answer (`/readyz`)."""
        ...


class IncidentStore(Protocol):
    """Incidents and their timelines: one unresolved incident per (cluster, subject, rule),
    moved only as `bot.incidents.lifecycle` allows, each move written with its timeline
    entry. Errors besides `StoreUnavailable`: `NotFound`, `IllegalTransition`,
    `StateChanged` (someone moved it first: read it again)."""

    def record_diagnosis(
        self,
        cluster: str,
        diagnosis: Diagnosis,
        now: datetime,
        reopen_window_s: int,
        replaces: Sequence[str] = (),
    ) -> Recorded:
        """The incident for (cluster, subject, rule): the open one (updated), an open one of a
        rule in `replaces` (the less specific stories this diagnosis explains: superseded in
        place, its undecided requests withdrawn), a resolved one reopened within the window,
        or a new one. Seeing the symptom clears the incident's absence."""
        ...

    def diagnosis(self, incident_id: str) -> Diagnosis | None:
        """The incident's diagnosis as last recorded."""
        ...

    def hold(self, incident_id: str, until: datetime | None) -> None:
        """Hold (or release, with None) the incident's proposals until `until`."""
        ...

    def mark_absent(self, incident_id: str, since: datetime) -> Incident:
        """The symptom was not seen; keeps the earliest `since` of an absence."""
        ...

    def mark_present(self, incident_id: str) -> None: ...

    def incident(self, incident_id: str) -> Incident: ...

    def incidents(
        self, node: str | None = None, states: Sequence[IncidentState] = ()
    ) -> list[Incident]: ...

    def count_incidents(self, states: Sequence[IncidentState]) -> int: ...

    def incidents_for_signal(self, fingerprint: str) -> list[Incident]: ...

    def transition(
        self,
        incident_id: str,
        target: IncidentState,
        actor: str,
        now: datetime,
        text: str = "",
        data: Mapping[str, object] | None = None,
    ) -> Incident:
        """Moves the incident (legal moves only) and writes the timeline entry with it. To
        `resolved`: refused (`StateChanged`) while one of its requests is being executed, and
        every request of it not yet decided is withdrawn in the same transaction."""
        ...

    def set_chat_ref(self, incident_id: str, chat_ref: str) -> None: ...

    def set_parent(self, incident_id: str, parent_id: str) -> None:
        """Groups a node incident under its pool-wide incident."""
        ...

    def append(self, entry: TimelineEntry) -> None: ...

    def timeline(self, incident_id: str) -> list[TimelineEntry]: ...


class ActionStore(Protocol):
    """Proposed actions, the votes on them and each one's single execution (invariant 3): a
    request is decided once (executed, denied or withdrawn), whoever asks how often; and the
    signed chat requests that propose and vote, each taken once. Errors besides
    `StoreUnavailable`: `NotFound`."""

    def add_request(self, request: ActionRequest) -> None: ...

    def request(self, request_id: str) -> ActionRequest: ...

    def requests(self, incident_id: str) -> list[ActionRequest]: ...

    def incidents_waiting_in_vain(self, now: datetime) -> list[str]:
        """Ids of incidents awaiting approval whose every request expired undecided."""
        ...

    def requests_to_execute(self, now: datetime) -> list[ActionRequest]:
        """Unexpired requests with a vote and no execution: what the leader picks up."""
        ...

    def add_vote(self, vote: Vote) -> bool:
        """False when this person already approved this request (a double click)."""
        ...

    def votes(self, request_id: str) -> list[Vote]: ...

    def claim_execution(self, request_id: str, executor: str, now: datetime) -> bool:
        """The one place an approval turns into action: True for exactly one caller ever,
        whatever the clicks, retries, restarts or replicas (a uniqueness constraint), and
        only while the request's incident is not resolved (checked in the same transaction;
        a request of a resolved incident is withdrawn instead)."""
        ...

    def finish_execution(
        self,
        request_id: str,
        outcome: ExecutionOutcome,
        detail: str,
        now: datetime,
        executor: str | None = None,
    ) -> bool:
        """Records the result; with `executor`, only while that executor still owns the
        unfinished row (False: another process took it over, and reports it)."""
        ...

    def execution(self, request_id: str) -> Execution | None: ...

    def unfinished_executions(self) -> Sequence[Execution]:
        """Claimed but never finished: what a restart must resume or report."""
        ...

    def mark_acting(self, request_id: str, executor: str) -> None:
        """Every check passed: from here on the action may be resumed after a crash."""
        ...

    def record_withdrawal(self, request_id: str, detail: str, now: datetime) -> bool:
        """The request will never act (its incident is over), stored finished in one
        statement: False when it was already decided."""
        ...

    def record_denial(self, request_id: str, who: str, reason: str, now: datetime) -> bool:
        """A person's no, stored finished in one statement: False when the request was
        already decided (executed or denied)."""
        ...

    def beat(self, request_id: str, executor: str, now: datetime) -> bool:
        """The owner of a running execution says it is alive; False when it no longer owns
        it (taken over, or finished)."""
        ...

    def release_execution(self, request_id: str, executor: str) -> bool:
        """The owner of an unfinished execution leaves it to be taken over at once (its
        heartbeat made stale); False when it no longer owns it."""
        ...

    def take_over_execution(
        self, request_id: str, executor: str, now: datetime, stale_before: datetime
    ) -> bool:
        """Make `executor` the owner of an unfinished execution, when it already is (its
        earlier life) or the owner's last heartbeat is older than `stale_before`. True for
        exactly one of several callers at once."""
        ...

    def note_signed_request(self, digest: str, sent_at: datetime, forget_before: datetime) -> bool:
        """A signed chat request arrived (`digest`: of its signature, which covers its
        timestamp `sent_at` and its body). True for the first to note it, False for every
        later copy, whichever replica, or life of one, notes it (a uniqueness constraint, as
        a vote's). Requests signed before `forget_before` are forgotten in the same
        transaction: the caller passes the moment before which the signer's own rules refuse
        a request anyway."""
        ...


class Chat(Protocol):
    """Where people read diagnoses and decide: Slack in production, the terminal in `demo`.
    Delivery is the adapter's (Slack's goes through the store's outbox)."""

    def post_diagnosis(
        self,
        incident: Incident,
        diagnosis: Diagnosis,
        requests: Sequence[ActionRequest],
        under: Incident | None = None,
    ) -> str | None:
        """Posts the message; returns where it lives (the incident's `chat_ref`), if known.
        `under`: the pool-wide incident this one is part of; the message goes in that
        incident's thread, not in the channel (one channel message for a pool failure)."""
        ...

    def post_thread(self, incident: Incident, text: str) -> None:
        """A line in the incident's thread: progress, decisions, the summary."""
        ...

    def ask_again(
        self, incident: Incident | None, old: ActionRequest, new: ActionRequest, why: str
    ) -> None:
        """The node changed after `old` was approved: `old` will never run (its buttons go,
        `why` instead), and `new` needs approving (its own buttons)."""
        ...

    def revise_diagnosis(
        self,
        incident: Incident,
        diagnosis: Diagnosis,
        requests: Sequence[ActionRequest],
        note: str,
    ) -> None:
        """The incident's message now tells `diagnosis`, with `requests`' buttons (a better
        diagnosis superseded the first, the problem came back, held proposals were released);
        `note` says why, in its thread."""
        ...

    def withdraw(self, incident: Incident, request: ActionRequest, why: str) -> None:
        """`request` will never act (its incident resolved or was superseded): its buttons
        go, `why` instead."""
        ...

    def post_notice(self, text: str, monospace: bool = False) -> None:
        """Something with no incident: an alert that names no node, a sweep's finding, the
        digest. `monospace`: columns and a chart that only line up in a fixed-width font."""
        ...

    def post_result(self, request: ActionRequest, text: str) -> None:
        """What came of a request no incident holds (`/gpubot drain NODE`), told where it
        was asked: under its proposal, so whoever asked and whoever approved read it."""
        ...


class Outbox(Protocol):
    """The store's durable queue of outgoing chat calls (invariant 8)."""

    def outbox_put(
        self,
        key: str,
        group_key: str,
        method: str,
        payload: Mapping[str, object],
        now: datetime,
        refers_to: str | None = None,
    ) -> OutboxItem: ...

    def outbox_item(self, key: str) -> OutboxItem | None: ...

    def outbox_latest_update(self, key: str) -> OutboxItem | None:
        """The last `chat.update` queued for the message `key`, if any."""
        ...

    def outbox_due(self, now: datetime, limit: int = 50) -> list[OutboxItem]: ...

    def outbox_sent(self, item_id: int, result: Mapping[str, object], now: datetime) -> bool: ...

    def outbox_retry(
        self, item_id: int, at: datetime, error: str, *, give_up: bool = False
    ) -> None: ...

    def outbox_pending(self) -> int: ...


class Store(SignalStore, IncidentStore, ActionStore, Outbox, Protocol):
    """Everything gpubot must not lose or do twice: the four parts above, in one database.
    Each method is one transaction: it happened whole or not at all. Errors:
    `StoreUnavailable` (down, locked: answer 503 and let the sender retry), and each part's
    own. A caller that needs one part takes that part's Protocol, not this one."""
