"""Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does it:
every replica accepts webhooks and approvals, only the leader acts and runs scheduled jobs.

Expiry is judged on this replica's own clock, from when it last saw the lease record change
(client-go's `observedTime`), never from the holder's `renewTime`: clocks of two machines
disagree, and a skewed clock must not hand the lease over early. A leader that cannot renew
within `renew_deadline_s` stops leading before anyone else may take over, so two leaders
never overlap by design; the store's one-execution-per-request constraint covers the rest.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot.clock import utcnow
from bot.config import ServeSettings
from bot.errors import AlreadyExists, Conflict, GpubotError, NotFound
from bot.kube_objects import Obj, meta, spec_of
from bot.ports import Cluster

Monotonic = Callable[[], float]


def _micro_time(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_SERVE = ServeSettings()
"""Where the lease's defaults come from: `gpubot serve`'s settings say them once."""


@dataclass(frozen=True)
class LeaseConfig:
    """The Lease the replicas contend for, and its timing: `ServeSettings`' lease fields,
    named as the elector uses them (its defaults are theirs, so the two never disagree)."""

    name: str = _SERVE.lease_name
    namespace: str = _SERVE.lease_namespace
    lease_duration_s: float = _SERVE.lease_duration_s
    renew_deadline_s: float = _SERVE.renew_deadline_s
    retry_period_s: float = _SERVE.retry_period_s

    @classmethod
    def from_settings(cls, serve: ServeSettings) -> LeaseConfig:
        return cls(
            name=serve.lease_name,
            namespace=serve.lease_namespace,
            lease_duration_s=serve.lease_duration_s,
            renew_deadline_s=serve.renew_deadline_s,
            retry_period_s=serve.retry_period_s,
        )


class LeaderElector:
    """Owns this replica's view of the Lease (the record last seen and when it changed, its
    own last renewal) and the thread that renews or tries to acquire it. Never: calls itself
    leader once its last renewal is older than the renew deadline, or judges another's lease
    expired by any clock but its own."""

    def __init__(
        self,
        cluster: Cluster,
        identity: str,
        config: LeaseConfig | None = None,
        *,
        monotonic: Monotonic = time.monotonic,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.identity = identity
        self.config = config or LeaseConfig()
        self._monotonic = monotonic
        self._on_change = on_change or (lambda _leading: None)
        self._observed: tuple[str, str] | None = None
        """(holder, renewTime) of the record last seen, and when we saw it change."""
        self._observed_at = 0.0
        self._renewed_at: float | None = None
        self._leading = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def is_leader(self) -> bool:
        """True only while the last renewal is younger than the renew deadline."""
        if self._renewed_at is None:
            return False
        return self._monotonic() - self._renewed_at < self.config.renew_deadline_s

    def _lease(self, previous: dict[str, Any] | None, version: str | None) -> Obj:
        now = _micro_time(utcnow())
        spec = dict(previous or {})
        taking_over = spec.get("holderIdentity") != self.identity
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=int(self.config.lease_duration_s),
            renewTime=now,
        )
        if taking_over:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (
                1 if previous else 0
            )
        metadata: dict[str, Any] = {
            "name": self.config.name,
            "namespace": self.config.namespace,
        }
        if version:
            metadata["resourceVersion"] = version
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": spec,
        }

    def try_acquire_or_renew(self) -> bool:
        """One round: True when this replica holds the lease afterwards."""
        c = self.config
        try:
            try:
                current = self.cluster.get("Lease", c.namespace, c.name)
            except NotFound:
                self.cluster.create("Lease", c.namespace, self._lease(None, None))
                return self._renewed()
            spec: dict[str, Any] = current.get("spec") or {}
            record = (str(spec.get("holderIdentity") or ""), str(spec.get("renewTime") or ""))
            if record != self._observed:
                self._observed, self._observed_at = record, self._monotonic()
            holder = record[0]
            duration = float(spec.get("leaseDurationSeconds") or c.lease_duration_s)
            expired = self._monotonic() - self._observed_at >= duration
            if holder and holder != self.identity and not expired:
                return self._lost()
            version = meta(current).get("resourceVersion")
            self.cluster.replace("Lease", c.namespace, c.name, self._lease(spec, version))
            return self._renewed()
        except (Conflict, AlreadyExists):
            # Someone else wrote (or created) the lease between our read and write: they won
            # this round.
            return self._lost()
        except GpubotError:
            # The API is away: keep leading only until the renew deadline says otherwise.
            return self._settle()

    def _renewed(self) -> bool:
        self._renewed_at = self._monotonic()
        return self._settle()

    def _lost(self) -> bool:
        self._renewed_at = None
        return self._settle()

    def _settle(self) -> bool:
        leading = self.is_leader
        if leading != self._leading:
            self._leading = leading
            self._on_change(leading)
        return leading

    def release(self) -> None:
        """On a clean shutdown: let the next replica take over at once, not after expiry."""
        c = self.config
        if not self.is_leader:
            return
        try:
            current = self.cluster.get("Lease", c.namespace, c.name)
            spec = dict(spec_of(current))
            if spec.get("holderIdentity") != self.identity:
                return
            spec.update(holderIdentity="", leaseDurationSeconds=1)
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": c.name,
                    "namespace": c.namespace,
                    "resourceVersion": meta(current).get("resourceVersion"),
                },
                "spec": spec,
            }
            self.cluster.replace("Lease", c.namespace, c.name, body)
        except GpubotError:
            pass
        finally:
            self._lost()

    def start(self) -> LeaderElector:
        def loop() -> None:
            while not self._stop.is_set():
                self.try_acquire_or_renew()
                self._stop.wait(self.config.retry_period_s)

        self._thread = threading.Thread(target=loop, name="leader-election", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.config.retry_period_s + 5)
        self.release()
