"""A snapshot of the cluster: the objects of `kubectl get nodes,pods,events,pdb,ds -A -o json`
(or of the live API, read the same way), by kind, and the indexes every fact reads them by.

Why it exists: the facts are computed from plain JSON objects, whatever their origin (a file,
the API server, the simulator), so anything the API server can return a snapshot can hold.
What it must never do: interpret what it holds (facts are computed elsewhere, opinions only
in the rule files).
"""

from __future__ import annotations

import json
import stat
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from bot.config import InputLimits
from bot.errors import InputError
from bot.facts.decoding import decode_trimmed, read_trimmed
from bot.input_files import Limit, check_size, read_stream_within, read_within
from bot.kube_objects import (
    Obj,
    controller_of,
    event_time,
    name_of,
    namespace_of,
    spec_of,
)
from bot.model import Lang
from bot.texts import say
from bot.yamlfiles import load_documents


@dataclass
class Snapshot:
    """The objects of one snapshot, by kind."""

    nodes: list[Obj] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    events: list[Obj] = field(default_factory=list)
    pdbs: list[Obj] = field(default_factory=list)
    daemonsets: list[Obj] = field(default_factory=list)
    every_daemonset: bool = False
    """`daemonsets` is the cluster's whole list (read from the live API), so a DaemonSet not
    in it is gone. A file may hold some of them, or none: there nothing is said to be gone."""

    @classmethod
    def from_items(cls, items: Iterable[Obj], where: str = "snapshot") -> Snapshot:
        snapshot = cls()
        buckets = {
            "Node": snapshot.nodes,
            "Pod": snapshot.pods,
            "Event": snapshot.events,
            "PodDisruptionBudget": snapshot.pdbs,
            "DaemonSet": snapshot.daemonsets,
        }
        for index, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise InputError(f"{where}: items[{index}]", "expected a Kubernetes object")
            kind = item.get("kind")
            if not isinstance(kind, str):
                raise InputError(f"{where}: items[{index}]", "object has no kind")
            if not name_of(item):
                raise InputError(f"{where}: items[{index}] ({kind})", "metadata.name missing")
            bucket = buckets.get(kind)
            if bucket is not None:
                bucket.append(item)
        return snapshot


def read_objects(text: str, where: str) -> list[Obj]:
    """The objects of what kubectl prints: a JSON or YAML List (`-o json`, `-o yaml`), one
    object, or a stream of YAML documents (`---`), as they come. YAML is read the one
    bounded way (`bot.yamlfiles`): aliases that would expand it past what Kubernetes reads
    are refused."""
    if text.lstrip().startswith(("{", "[")):  # JSON (kubectl -o json): JSON's errors
        return _objects([_json(text, where)], where)
    return _objects(load_documents(text, where), where)


def _objects(documents: list[Any], where: str) -> list[Obj]:
    objects: list[Obj] = []
    for document in documents:
        if isinstance(document, Mapping) and isinstance(document.get("items"), list):
            objects.extend(document["items"])
        elif isinstance(document, Mapping) and document.get("kind") not in (None, "List"):
            objects.append(dict(document))
        else:
            raise InputError(
                where, "expected a Kubernetes List (an object with an items array) or objects"
            )
    return objects


_DECODER = msgspec.json.Decoder()


def _json(text: str | bytes, where: str) -> Any:
    """msgspec first (a 300 MB snapshot in 2.0 s of CPU where json.loads takes 3.0 and orjson
    2.6, garbage collection off); what it refuses and `json` takes (NaN, bytes that are not
    UTF-8, replaced) or refuses too, `json` reads, so results and error messages are the
    standard library's."""
    try:
        return _DECODER.decode(text)
    except (msgspec.DecodeError, RecursionError):  # msgspec's own depth guard raises this
        pass
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}:{exc.lineno}", f"not valid JSON: {exc.msg}") from exc
    except RecursionError as exc:  # `[[[[...` a hundred thousand deep: no object nests so
        raise InputError(where, say(Lang.EN, "input.nested_too_deep")) from exc


def read_objects_file(
    path: Path, for_facts: bool = False, limits: InputLimits | None = None
) -> list[Obj]:
    """`read_objects` of a file, or of standard input when the path is `-`, within the size
    limit of a JSON or a YAML snapshot (`limits`; the defaults when None). A regular file
    over its limit is refused by its size before it is read; a stream (stdin, a pipe) is
    read up to the larger limit, then held to its own. `for_facts`: a JSON file's objects
    hold only what the facts read (`bot.facts.decoding`), for a snapshot only diagnosed."""
    limits = limits or InputLimits()
    where = "stdin" if str(path) == "-" else str(path)
    if where == "stdin":
        raw = read_stream_within(sys.stdin.buffer, _larger(limits), where)
    elif not _regular(path):
        raw = read_within(path, _larger(limits))  # a pipe's kind shows once it is read
    else:
        json_file = _is_json(_head(path))
        check_size(path, limits.snapshot() if json_file else limits.yaml_snapshot())
        if for_facts and json_file:
            mapped = read_trimmed(path)
            if mapped is not None:
                return _objects([mapped], where)
        raw = read_within(path, limits.snapshot() if json_file else limits.yaml_snapshot())
    json_text = _is_json(raw)
    limit = limits.snapshot() if json_text else limits.yaml_snapshot()
    if len(raw) > limit.max_bytes:
        raise limit.refusal(where, len(raw))
    if json_text:
        trimmed = decode_trimmed(raw) if for_facts else None
        if trimmed is not None:
            return _objects([trimmed], where)
        # Straight from the bytes: no decoded copy of a 300 MB file alongside them.
        return _objects([_json(raw, where)], where)
    return read_objects(raw.decode("utf-8", errors="replace"), where)


def _is_json(head: bytes) -> bool:
    """kubectl's `-o json` (an object or an array); anything else is read as YAML."""
    return head.lstrip()[:1] in (b"{", b"[")


def _head(path: Path) -> bytes:
    """The first bytes of a regular file, to tell JSON from YAML; none when unreadable
    (`read_within` says why)."""
    try:
        with path.open("rb") as file:
            return file.read(4096)
    except OSError:
        return b""


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return True  # read as a file: `read_within` says why it cannot be


def _larger(limits: InputLimits) -> Limit:
    json_limit, yaml_limit = limits.snapshot(), limits.yaml_snapshot()
    return json_limit if json_limit.mib >= yaml_limit.mib else yaml_limit


def load_snapshot(*paths: Path, limits: InputLimits | None = None) -> Snapshot:
    """A snapshot of one or more files of kubectl output (JSON or YAML; `-` is stdin), each
    within the size limit of its kind (`limits`; the defaults when None)."""
    objects: list[Obj] = []
    for path in paths:
        objects.extend(read_objects_file(path, limits=limits))
    where = ", ".join(str(p) for p in paths) or "snapshot"
    return Snapshot.from_items(objects, where)


def parse_snapshot(raw: Any, where: str = "snapshot") -> Snapshot:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("items"), list):
        raise InputError(where, "expected a Kubernetes List (an object with an items array)")
    return Snapshot.from_items(raw["items"], where)


@dataclass
class Index:
    """The snapshot's objects grouped the way the node facts need them."""

    pods_by_node: dict[str, list[Obj]]
    node_events: dict[str, list[Obj]]
    pod_events: dict[tuple[str, str], list[Obj]]
    owner_events: list[Obj]
    kill_events_by_host: dict[str, list[Obj]]
    pdbs_by_namespace: dict[str, list[Obj]]
    pods_by_daemonset: dict[tuple[str, str], list[Obj]]
    """(namespace, DaemonSet) -> its pods: a rollout's revisions side by side."""
    daemonsets: frozenset[tuple[str, str]] | None = None
    """(namespace, name) of every DaemonSet when the snapshot holds them all
    (`Snapshot.every_daemonset`); None otherwise, and then every DaemonSet counts as there."""
    _pdbs_by_label: dict[str, dict[tuple[str, str], list[int]]] = field(default_factory=dict)
    _pdbs_unlabelled: dict[str, list[int]] = field(default_factory=dict)

    def daemonset_exists(self, namespace: str, name: str) -> bool:
        return self.daemonsets is None or (namespace, name) in self.daemonsets

    def pdb_candidates(self, namespace: str, labels: Mapping[str, str]) -> list[Obj]:
        """The PDBs of `namespace` whose selector may match `labels`, in snapshot order; the
        caller still applies each selector. A fleet has a PDB per training job in one
        namespace: trying every selector on every pod grew as pods times jobs."""
        pdbs = self.pdbs_by_namespace.get(namespace, [])
        if not pdbs:
            return []
        if namespace not in self._pdbs_unlabelled:
            self._index_pdbs(namespace, pdbs)
        keyed = self._pdbs_by_label[namespace]
        found = list(self._pdbs_unlabelled[namespace])
        for pair in labels.items():
            found += keyed.get(pair, ())
        return [pdbs[i] for i in sorted(set(found))]

    def _index_pdbs(self, namespace: str, pdbs: list[Obj]) -> None:
        # Keyed by one of its matchLabels (a pod without that label cannot match); a
        # selector with none, or of an odd shape, is tried on every pod.
        keyed: dict[tuple[str, str], list[int]] = defaultdict(list)
        unlabelled: list[int] = []
        for i, pdb in enumerate(pdbs):
            selector = spec_of(pdb).get("selector")
            wanted = selector.get("matchLabels") if isinstance(selector, Mapping) else None
            first = next(iter(wanted.items()), None) if isinstance(wanted, Mapping) else None
            if first is not None and isinstance(first[0], str) and isinstance(first[1], str):
                keyed[first].append(i)
            else:
                unlabelled.append(i)
        self._pdbs_by_label[namespace] = keyed
        self._pdbs_unlabelled[namespace] = unlabelled

    @classmethod
    def build(cls, snapshot: Snapshot) -> Index:
        pods_by_node: dict[str, list[Obj]] = defaultdict(list)
        pods_by_daemonset: dict[tuple[str, str], list[Obj]] = defaultdict(list)
        for pod in snapshot.pods:
            node = spec_of(pod).get("nodeName")
            if node:
                pods_by_node[node].append(pod)
            owner = controller_of(pod)
            if owner is not None and owner[0] == "DaemonSet":
                pods_by_daemonset[(namespace_of(pod), owner[1])].append(pod)
        node_events: dict[str, list[Obj]] = defaultdict(list)
        pod_events: dict[tuple[str, str], list[Obj]] = defaultdict(list)
        owner_events: list[Obj] = []
        kills: dict[str, list[Obj]] = defaultdict(list)
        for event in snapshot.events:
            involved = event.get("involvedObject") or event.get("regarding") or {}
            kind = involved.get("kind")
            if kind == "Node":
                node_events[str(involved.get("name", ""))].append(event)
            elif kind == "Pod":
                key = (str(involved.get("namespace", "")), str(involved.get("name", "")))
                pod_events[key].append(event)
                if event.get("reason") in ("Killing", "Evicted"):
                    source = event.get("source") or {}
                    host = source.get("host") or event.get("reportingInstance")
                    if host:
                        kills[str(host)].append(event)
            elif kind in ("ReplicaSet", "Job", "StatefulSet"):
                owner_events.append(event)
        pdbs: dict[str, list[Obj]] = defaultdict(list)
        for pdb in snapshot.pdbs:
            pdbs[namespace_of(pdb)].append(pdb)
        daemonsets = None
        if snapshot.every_daemonset:
            daemonsets = frozenset((namespace_of(d), name_of(d)) for d in snapshot.daemonsets)
        return cls(
            pods_by_node,
            node_events,
            pod_events,
            owner_events,
            kills,
            pdbs,
            pods_by_daemonset,
            daemonsets,
        )


def age_s(now: datetime, then: datetime | None) -> int | None:
    return None if then is None else max(0, int((now - then).total_seconds()))


def latest_event(events: Iterable[Obj], reason: str) -> datetime | None:
    times = [t for e in events if e.get("reason") == reason and (t := event_time(e)) is not None]
    return max(times, default=None)
