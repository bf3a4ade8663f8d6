"""A kubectl JSON snapshot decoded from its bytes straight into objects trimmed to the parts
the facts read, holding nothing else: structs that read like the dicts they stand for.

Why it exists: a 5,000-node snapshot is 300 MB of JSON. Decoded whole, it is 1.2 GB of dicts
(managed fields, images, probes, tolerations, every condition's timestamps), held until the
command ends; msgspec skips what a struct does not declare without allocating it. A struct
is a fifth of a small dict (a condition: 48 bytes against 200; a pod holds about twenty such
parts), so the trimmed objects of that snapshot are 0.38 GB, not the 0.56 GB of trimmed
dicts. A file is read through a memory map, its items one at a time, and the pages already
read are given back as it goes: the file's bytes and the objects are never held together.
Kept beside the fact code: a part the facts start reading must be declared here
(`tests/unit/test_decoding.py` compares the facts of every snapshot in the repository decoded
both ways).
What it must never do: refuse what the generic reader takes. Where the declared shape does not
fit (an unexpected type, a non-object), it answers None and the caller decodes the bytes the
generic way, with the generic errors.
"""

from __future__ import annotations

import contextlib
import mmap
import stat
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, cast

import msgspec
from msgspec import UNSET, UnsetType
from msgspec.structs import astuple

from bot.kube_objects import DECODED_PARTS, Obj


class _Part(msgspec.Struct, gc=False):
    """A part of an object, read as the dict it stands for: `get`, `[]`, `in`, iteration and
    `len` see only the fields the input had (a field it lacked is UNSET). Not tracked by the
    cyclic collector: decoded JSON holds no cycles."""

    _declared: ClassVar[frozenset[str]] = frozenset()
    """Its fields (a method's name is not one)."""

    def get(self, key: str, default: Any = None) -> Any:
        value = getattr(self, key) if key in self._declared else UNSET
        return default if value is UNSET else value

    def __getitem__(self, key: str) -> Any:
        value = self.get(key, UNSET)
        if value is UNSET:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._declared and getattr(self, key) is not UNSET

    def __iter__(self) -> Iterator[str]:
        return (k for k in self.__struct_fields__ if getattr(self, k) is not UNSET)

    def __len__(self) -> int:
        return len(self.__struct_fields__) - astuple(self).count(UNSET)

    def __bool__(self) -> bool:
        # `part or {}` is everywhere in the fact code: one C call, not a generator.
        return astuple(self).count(UNSET) < len(self.__struct_fields__)

    def keys(self) -> list[str]:
        return list(self)

    def items(self) -> list[tuple[str, Any]]:
        return [(k, getattr(self, k)) for k in self]

    def values(self) -> list[Any]:
        return [getattr(self, k) for k in self]


# Field names are the API's own (camelCase): they are what msgspec matches in the JSON.
# Leaves read whole (labels, taints, capacity...) are `Any`: any value the generic reader
# takes, this one takes too (null included, as None).


class _Owner(_Part, gc=False):
    kind: Any = UNSET
    name: Any = UNSET
    controller: Any = UNSET


class _Meta(_Part, gc=False):
    name: Any = UNSET
    namespace: Any = UNSET
    labels: Any = UNSET
    annotations: Any = UNSET
    creationTimestamp: Any = UNSET
    deletionTimestamp: Any = UNSET
    finalizers: Any = UNSET
    generateName: Any = UNSET
    ownerReferences: list[_Owner] | UnsetType = UNSET


class _Resources(_Part, gc=False):
    requests: Any = UNSET
    limits: Any = UNSET


class _Container(_Part, gc=False):
    resources: _Resources | UnsetType = UNSET


class _Volume(_Part, gc=False):
    emptyDir: Any = UNSET


class _Spec(_Part, gc=False):
    # Pod
    nodeName: Any = UNSET
    containers: list[_Container] | UnsetType = UNSET
    initContainers: list[_Container] | UnsetType = UNSET
    overhead: Any = UNSET
    volumes: list[_Volume] | UnsetType = UNSET
    terminationGracePeriodSeconds: Any = UNSET
    # Node
    taints: Any = UNSET
    unschedulable: Any = UNSET
    # PodDisruptionBudget
    selector: Any = UNSET


class _Condition(_Part, gc=False):
    type: Any = UNSET
    status: Any = UNSET
    message: Any = UNSET


class _Waiting(_Part, gc=False):
    reason: Any = UNSET
    message: Any = UNSET


class _Terminated(_Part, gc=False):
    exitCode: Any = UNSET
    reason: Any = UNSET
    message: Any = UNSET
    finishedAt: Any = UNSET


class _State(_Part, gc=False):
    waiting: _Waiting | UnsetType = UNSET
    terminated: _Terminated | UnsetType = UNSET


class _ContainerStatus(_Part, gc=False):
    name: Any = UNSET
    restartCount: Any = UNSET
    state: _State | UnsetType = UNSET
    lastState: _State | UnsetType = UNSET


class _NodeInfo(_Part, gc=False):
    bootID: Any = UNSET
    kubeletVersion: Any = UNSET
    containerRuntimeVersion: Any = UNSET


class _PodIP(_Part, gc=False):
    ip: Any = UNSET


class _Status(_Part, gc=False):
    # Pod
    phase: Any = UNSET
    reason: Any = UNSET
    message: Any = UNSET
    conditions: list[_Condition] | UnsetType = UNSET
    containerStatuses: list[_ContainerStatus] | UnsetType = UNSET
    initContainerStatuses: list[_ContainerStatus] | UnsetType = UNSET
    podIP: Any = UNSET
    podIPs: list[_PodIP] | UnsetType = UNSET
    # Node
    capacity: Any = UNSET
    allocatable: Any = UNSET
    addresses: Any = UNSET
    nodeInfo: _NodeInfo | UnsetType = UNSET
    # PodDisruptionBudget
    disruptionsAllowed: Any = UNSET
    currentHealthy: Any = UNSET
    desiredHealthy: Any = UNSET


class _Object(_Part, gc=False):
    """Any kind the snapshot sorts (Node, Pod, Event, PodDisruptionBudget, DaemonSet): the
    union of their parts, each present only where the input has it."""

    kind: Any = UNSET
    metadata: _Meta | UnsetType = UNSET
    spec: _Spec | UnsetType = UNSET
    status: _Status | UnsetType = UNSET
    # Event (core/v1 and events.k8s.io)
    involvedObject: Any = UNSET
    regarding: Any = UNSET
    reason: Any = UNSET
    message: Any = UNSET
    source: Any = UNSET
    reportingInstance: Any = UNSET
    series: Any = UNSET
    lastTimestamp: Any = UNSET
    eventTime: Any = UNSET
    firstTimestamp: Any = UNSET


# What the fact code asks of an object part is `isinstance(part, Mapping)`, or its exact type.
Mapping.register(_Part)
# Every part, by its base: a part left out would read as empty (no field declared).
for _kind in _Part.__subclasses__():
    _kind._declared = frozenset(_kind.__struct_fields__)
    DECODED_PARTS.add(_kind)


class _List(msgspec.Struct):
    """A kubectl List, its items left undecoded (views of the input's bytes, not copies)."""

    items: list[msgspec.Raw]


_LIST = msgspec.json.Decoder(_List)
_OBJECT = msgspec.json.Decoder(_Object)
GIVE_BACK_EVERY = 32 << 20
"""Bytes of items decoded between two returns of a mapped file's pages to the kernel."""


def decode_trimmed(raw: bytes) -> Obj | None:
    """The JSON document `raw`, trimmed to what the facts read; None where its shape is not
    one this decoder declares (the caller reads it the generic way)."""
    return _decode(raw, lambda _done: None, GIVE_BACK_EVERY)


def read_trimmed(path: Path, give_back_every: int = GIVE_BACK_EVERY) -> Obj | None:
    """`decode_trimmed` of the regular file at `path`, mapped rather than read: the pages of
    the items already decoded are given back every `give_back_every` bytes, so a 300 MB file
    is never held beside its objects. None where it is not a regular file, is empty, or its
    shape is not one this decoder declares."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return None  # a pipe (`<(kubectl get ...)`) is read the generic way, once
        with path.open("rb") as file:
            mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # ValueError: an empty file cannot be mapped
        return None

    def give_back(done: int) -> None:
        # Clean pages of a file: dropped from this process, still in the page cache, read
        # again from there if touched. `done` undercounts the offset (it leaves out what lies
        # between items), so nothing ahead of the decoder is dropped.
        length = done - done % mmap.PAGESIZE
        if length > 0 and hasattr(mmap, "MADV_DONTNEED"):
            mapped.madvise(mmap.MADV_DONTNEED, 0, length)

    try:
        return _decode(mapped, give_back, give_back_every)
    finally:
        give_back(len(mapped))
        with contextlib.suppress(BufferError):  # a view still held: it goes with the view
            mapped.close()


def _decode(buffer: Any, give_back: Callable[[int], None], every: int) -> Obj | None:
    try:
        document = _LIST.decode(buffer)
    except (msgspec.DecodeError, RecursionError):  # a ValidationError is one too; msgspec's
        return _one_object(buffer)  # guard against deep nesting raises RecursionError
    raws: list[msgspec.Raw | None] = list(document.items)
    del document
    items: list[Any] = []
    done, mark = 0, every
    try:
        for i, raw in enumerate(raws):
            items.append(_OBJECT.decode(cast(msgspec.Raw, raw)))
            done += len(cast(msgspec.Raw, raw))
            raws[i] = None  # its view of the file goes with it
            if done >= mark:
                give_back(done)
                mark = done + every
    except (msgspec.DecodeError, RecursionError):
        return None
    return {"items": items}


def _one_object(buffer: Any) -> Obj | None:
    try:
        return cast(Obj, _OBJECT.decode(buffer))
    except (msgspec.DecodeError, RecursionError):
        return None
