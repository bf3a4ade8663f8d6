"""The disruption budgets' memory and the eviction check, as kube-apiserver's eviction handler
and the disruption controller keep them between them.

A budget counts, as still expected, the pods it let go that no replacement has stood in for
yet (the real budget's `status.disruptedPods`): without that memory, a drain could evict a
second pod of a budget of one before the first one's replacement exists. This module holds
that memory and answers, from it and the pods the store holds, each budget's status and
whether an eviction may go ahead.

It must never delete or evict anything itself (`gpusim.state` deletes once this allows it),
nor keep a budget's status anywhere but in what it computes on each read.
"""

from __future__ import annotations

from bot.kube_objects import (
    labels_of,
    meta,
    name_of,
    namespace_of,
    selector_matches,
    spec_of,
    status_of,
)
from gpusim.budgets import budget_status, counted, owner_key, violation
from gpusim.objects import Json
from gpusim.resources import BY_KIND
from gpusim.storage import ObjectStore

_PODS = BY_KIND["Pod"]
_PDBS = BY_KIND["PodDisruptionBudget"]


class Disruptions:
    """Per PodDisruptionBudget, the owners of the pods it let go that no replacement has
    stood in for yet. It owns that memory; it must never write an object, and it reads the
    store's objects only under the store's lock."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self._disrupted: dict[tuple[str, str], list[str]] = {}

    def status(self, pdb: Json) -> Json:
        """The budget's status, recomputed on read as the disruption controller keeps it
        current."""
        namespace = namespace_of(pdb)
        with self._store.lock:
            selector = spec_of(pdb).get("selector")
            pods = counted(
                p
                for p in self._store.in_namespace(_PODS, namespace)
                if selector_matches(selector, labels_of(p))
            )
            disrupted = len(self._disrupted.get((namespace, name_of(pdb)), []))
        return budget_status(pdb, pods, disrupted)

    def covering(self, pod: Json) -> list[Json]:
        """The budgets whose selector takes the pod (the caller holds the lock)."""
        return [
            pdb
            for pdb in self._store.objects(_PDBS)
            if namespace_of(pdb) == namespace_of(pod)
            and selector_matches(spec_of(pdb).get("selector"), labels_of(pod))
        ]

    def admit(self, pod: Json) -> None:
        """Let a Running pod go if every budget covering it allows a disruption, and remember
        it in each; raise the 429 a blocked eviction gets otherwise. A pod not Running, or
        already terminating, costs no budget (the caller holds the lock)."""
        if status_of(pod).get("phase") != "Running" or meta(pod).get("deletionTimestamp"):
            return
        covering = self.covering(pod)
        for pdb in covering:
            status = self.status(pdb)
            if status["disruptionsAllowed"] <= 0:
                raise violation(pdb, status)
        for pdb in covering:
            key = (namespace_of(pdb), name_of(pdb))
            self._disrupted.setdefault(key, []).append(owner_key(pod))

    def stood_in(self, pod: Json) -> None:
        """A new pod stands in for one its owner lost to a budget (the caller holds the lock)."""
        for pdb in self.covering(pod):
            owners = self._disrupted.get((namespace_of(pdb), name_of(pdb)), [])
            if owner_key(pod) in owners:
                owners.remove(owner_key(pod))
