"""A kubectl JSON snapshot decoded from its bytes straight into objects trimmed to the parts
the facts read: plain dicts, as the facts expect, holding nothing else.

Why it exists: a 5,000-node snapshot is 300 MB of JSON. Decoded whole, it is 1.2 GB of dicts
(managed fields, images, probes, tolerations, every condition's timestamps), held until the
command ends; msgspec skips what a `TypedDict` does not declare without allocating it, in
half the CPU. Kept beside the fact code: a part the facts start reading must be declared here
(`tests/unit/test_decoding.py` compares the facts of every snapshot in the repository decoded
both ways).
What it must never do: refuse what the generic reader takes. Where the declared shape does not
fit (an unexpected type, a non-object), it answers None and the caller decodes the bytes the
generic way, with the generic errors.
"""

from __future__ import annotations

from typing import Any, TypedDict, cast

import msgspec

from bot.kube.objects import Obj

# Field names are the API's own (camelCase): they are what msgspec matches in the JSON.
# Leaves read whole (labels, taints, capacity...) are `Any`: any value the generic reader
# takes, this one takes too. Each TypedDict holds only the keys present in the input.


class _Owner(TypedDict, total=False):
    kind: Any
    name: Any
    controller: Any


class _Meta(TypedDict, total=False):
    name: Any
    namespace: Any
    labels: Any
    annotations: Any
    creationTimestamp: Any
    deletionTimestamp: Any
    finalizers: Any
    generateName: Any
    ownerReferences: list[_Owner]


class _Resources(TypedDict, total=False):
    requests: Any
    limits: Any


class _Container(TypedDict, total=False):
    resources: _Resources


class _Volume(TypedDict, total=False):
    emptyDir: Any


class _Spec(TypedDict, total=False):
    # Pod
    nodeName: Any
    containers: list[_Container]
    initContainers: list[_Container]
    overhead: Any
    volumes: list[_Volume]
    terminationGracePeriodSeconds: Any
    # Node
    taints: Any
    unschedulable: Any
    # PodDisruptionBudget
    selector: Any


class _Condition(TypedDict, total=False):
    type: Any
    status: Any
    message: Any


class _Waiting(TypedDict, total=False):
    reason: Any
    message: Any


class _Terminated(TypedDict, total=False):
    exitCode: Any
    reason: Any
    message: Any
    finishedAt: Any


class _State(TypedDict, total=False):
    waiting: _Waiting
    terminated: _Terminated


class _ContainerStatus(TypedDict, total=False):
    name: Any
    restartCount: Any
    state: _State
    lastState: _State


class _NodeInfo(TypedDict, total=False):
    bootID: Any
    kubeletVersion: Any
    containerRuntimeVersion: Any


class _Status(TypedDict, total=False):
    # Pod
    phase: Any
    reason: Any
    message: Any
    conditions: list[_Condition]
    containerStatuses: list[_ContainerStatus]
    initContainerStatuses: list[_ContainerStatus]
    podIP: Any
    podIPs: Any
    # Node
    capacity: Any
    allocatable: Any
    addresses: Any
    nodeInfo: _NodeInfo
    # PodDisruptionBudget
    disruptionsAllowed: Any
    currentHealthy: Any
    desiredHealthy: Any


class _Object(TypedDict, total=False):
    """Any kind the snapshot sorts (Node, Pod, Event, PodDisruptionBudget, DaemonSet): the
    union of their parts, each present only where the input has it."""

    kind: Any
    metadata: _Meta
    spec: _Spec
    status: _Status
    # Event (core/v1 and events.k8s.io)
    involvedObject: Any
    regarding: Any
    reason: Any
    message: Any
    source: Any
    reportingInstance: Any
    series: Any
    lastTimestamp: Any
    eventTime: Any
    firstTimestamp: Any


class _Document(_Object, total=False):
    """A kubectl List, or one object."""

    items: list[_Object]


_DECODER = msgspec.json.Decoder(_Document)


def decode_trimmed(raw: bytes) -> Obj | None:
    """The JSON document `raw`, trimmed to what the facts read; None where its shape is not
    one this decoder declares (the caller reads it the generic way)."""
    try:
        return cast(Obj, _DECODER.decode(raw))
    except msgspec.DecodeError:  # a ValidationError is one too
        return None
