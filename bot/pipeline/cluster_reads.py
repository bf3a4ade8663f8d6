"""What a diagnosis pass reads of the cluster: a few nodes or all of them, the alerts still
firing, and the facts found from both, with what is kept of them between passes.

Why it exists: a pass is about the nodes its batch names when they are few, so a webhook about
one node costs what that node's facts cost, while pool rules still see every node (the others
as last found). Which read a pass makes, which facts it may reuse and what it gives back to
the system after reading everything are one job, apart from what the pass then records.

What it must never do: reuse a node's facts once the node's object changed, keep anything of
a snapshot past the facts found in it, or write anything (it only reads).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from bot.config import Settings
from bot.diagnose import NodeMatches
from bot.facts.collecting import absent_nodes, collect_facts, resolve_signal_nodes
from bot.facts.gpu_metrics import GpuEvidence
from bot.facts.live import read_scoped, read_snapshot
from bot.kube_objects import Obj, meta, name_of
from bot.model import ClusterFacts, NodeFacts, Signal
from bot.outside_text import kubernetes_name
from bot.pipeline.firing import FiringAlerts
from bot.ports import Cluster, SignalStore
from bot.rules.loading import POD_REFS
from bot.sources.alertmanager.understanding import is_address, with_prometheus_xids

SCOPED_MAX_NODES = 8
"""Up to this many nodes in a batch, read only what their facts need (every node, their pods
and events); more, or a sweep, reads the whole cluster. A webhook is about a few nodes, and
listing every pod of a large cluster for each one was most of the time to a diagnosis."""

Scope = frozenset[str] | None
"""The nodes a pass is about; None: the whole cluster."""


def _version(node: Obj) -> str:
    return str(meta(node).get("resourceVersion") or "")


def scope_of(batch: Sequence[Signal], nodes: frozenset[str] | None = None) -> Scope:
    """The batch's nodes when it names only a few (or `nodes` when given, and few enough);
    None (the whole cluster) when a signal names no node or there are too many. A name no
    node can have, that is no address and whose alert names no pod, is in no scope: no
    reading finds it, and it never goes into a field selector (`gpu-a1,status.phase=x` would
    be two)."""
    if nodes is not None:
        return _few(nodes)
    if not batch or any(s.node is None for s in batch):
        return None
    return _few(frozenset(s.node for s in batch if s.node and _findable(s)))


def _findable(signal: Signal) -> bool:
    """Could `resolve_signal_nodes` find a node for the signal: by its name, an address, or
    the pods its alert names?"""
    node = signal.node or ""
    return kubernetes_name(node) or is_address(node) or bool(signal.annotations.get(POD_REFS))


def _few(nodes: frozenset[str]) -> Scope:
    return nodes if len(nodes) <= SCOPED_MAX_NODES else None


def _malloc_trim() -> Callable[[int], object]:
    try:
        trim: Callable[[int], object] = ctypes.CDLL(
            ctypes.util.find_library("c") or "libc.so.6"
        ).malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to ask
        return lambda _pad: None
    return trim


_trim = _malloc_trim()


def give_back_memory() -> None:
    """After a pass over the whole cluster. Its snapshot and facts (hundreds of MiB at 1,000
    nodes) are freed when it ends, but glibc keeps the freed pages for later and a replica
    that has been through one storm would hold them for good: handed back to the system."""
    _trim(0)


@dataclass(frozen=True)
class Read:
    """What one pass found: the facts (this pass's own copies), the alerts firing with their
    nodes resolved, and the scope the pass is about (None once it had to read everything)."""

    facts: ClusterFacts
    signals: list[Signal]
    """Those about the cluster: an alert naming a node it does not have is no node's."""
    scope: Scope
    absent: list[Signal] = field(default_factory=list)
    """The signals new in this pass (its batch, and those that joined it) that name a node
    the cluster does not have: for the channel to be told once, never a node's facts."""


class ClusterReads:
    """Owns what passes keep of the cluster between them: each node's facts as last found
    with its pods and the node's resourceVersion then (for scoped passes), each node's rule
    matches (an unchanged node is not evaluated again), and the firing alerts already parsed.
    It must never be used by two passes at once (the pass's lock sees to it), nor keep the
    facts of a full pass's previous read beside the new one."""

    def __init__(
        self,
        *,
        settings: Settings,
        cluster: Cluster,
        store: SignalStore,
        gpu_evidence: Callable[[str], GpuEvidence] | None = None,
    ) -> None:
        self.settings = settings
        self.cluster = cluster
        self.gpu_evidence = gpu_evidence
        self.matches = NodeMatches()
        """Each node's rule matches, for `diagnose(earlier=...)`."""
        self._facts_seen: dict[str, tuple[str, NodeFacts]] = {}
        """Per node, the facts last found with its pods, and the node's resourceVersion then."""
        self._firing = FiringAlerts(store)

    def read(
        self,
        scope: Scope,
        now: datetime,
        meanwhile: Callable[[Scope], Sequence[Signal]],
        batch: Sequence[Signal] = (),
    ) -> Read:
        """The cluster for a pass about `scope`, and the alerts firing once it is read.
        `meanwhile(scope)` runs between the two and returns the signals that join the pass:
        deliveries stored while the cluster was read (a node's alerts Alertmanager sent in
        separate groups at the same moment, an ECC error and the Xid 48 it brings, are
        diagnosed together, not as two incidents one after the other). Of `batch` and those,
        the ones naming a node the cluster does not have are `Read.absent`."""
        snapshot = (
            read_snapshot(self.cluster) if scope is None else read_scoped(self.cluster, scope)
        )
        if scope is not None and not scope <= {name_of(n) for n in snapshot.nodes}:
            # An alert named its node by something else (an `instance` IP): which node it
            # means is only known after reading every node, so this pass reads everything.
            scope = None
            snapshot = read_snapshot(self.cluster)
        if scope is None:
            # A full pass finds every node's facts again, and no match of a node is reused
            # once its facts are new objects: what the last pass kept (tens of MiB at 1,000
            # nodes) would only be held beside this pass's snapshot and facts, at the peak.
            self._facts_seen = {}
            self.matches.clear()
        joined = meanwhile(scope)
        # A node an alert names is one of the cluster's, matched exactly, or no node at all:
        # its alerts open nothing and count nowhere, and the new ones are told once.
        signals, _absent = absent_nodes(
            snapshot, resolve_signal_nodes(snapshot, self._firing.read())
        )
        _present, absent = absent_nodes(snapshot, resolve_signal_nodes(snapshot, [*batch, *joined]))
        if self.gpu_evidence is not None:
            # An alert that names a GPU but not its Xid (a rule set that alerts on the gauge
            # without the code): Prometheus' reading of that GPU gives the code.
            signals = with_prometheus_xids(signals, self.gpu_evidence)
        facts = collect_facts(snapshot, signals, self.settings, now, self._reuse_for(scope))
        versions = {name_of(node): _version(node) for node in snapshot.nodes}
        # The raw objects (the largest thing a full pass holds) are not read after the facts:
        # freed now, not after the rules and the incidents, which take far longer.
        del snapshot
        facts = self._own_copies(facts)
        self._remember_facts(versions, facts.nodes, scope)
        return Read(facts, signals, scope, absent)

    def _reuse_for(self, scope: Scope) -> Callable[[Obj], NodeFacts | None]:
        """In a scoped pass, a node outside the scope keeps the facts last found with its
        pods, while its object is unchanged; a full pass finds everything again."""

        def reuse(node: Obj) -> NodeFacts | None:
            name = name_of(node)
            if scope is None or name in scope:
                return None
            seen = self._facts_seen.get(name)
            if seen is None or seen[0] != _version(node):
                return None
            return seen[1]

        return reuse

    def _own_copies(self, facts: ClusterFacts) -> ClusterFacts:
        """The facts found in this pass, rebuilt from their JSON once the snapshot is freed.
        Facts share their strings with the raw objects they were read from (names, labels,
        messages: about a hundred a node), and each such string kept between passes held
        the 16 KiB pool of the snapshot it sat in, so the snapshot's memory (about 100 MiB
        at 1,000 nodes) stayed the process's after a full pass. Facts reused from an earlier
        pass are copies already, and stay the same objects (their rule matches are kept)."""
        kept = {name: seen for name, (_version_then, seen) in self._facts_seen.items()}
        nodes = {
            name: found
            if found is kept.get(name)
            else NodeFacts.model_validate_json(found.model_dump_json(exclude_unset=True))
            for name, found in facts.nodes.items()
        }
        return facts.model_copy(update={"nodes": nodes})

    def _remember_facts(
        self,
        versions: Mapping[str, str],
        found: Mapping[str, NodeFacts],
        scope: Scope,
    ) -> None:
        """`versions`: each node's resourceVersion as this pass read it."""
        if scope is None:
            self._facts_seen = {
                name: (version, found[name]) for name, version in versions.items() if name in found
            }
            return
        for name, version in versions.items():
            if name in scope and name in found:
                self._facts_seen[name] = (version, found[name])
