"""The health gate's GPU smoke test (runbook step 9, item 2): a pod on the node under repair
runs `nvidia-smi -L`, and its output must list every GPU the node should have.

Why the pod is built as it is:

- Bound with `spec.nodeName`, not a nodeSelector. The node is cordoned during maintenance, and
  cordon only stops the scheduler; a pod bound by name skips the scheduler and the kubelet
  runs it anyway (the kubelet checks resources and NoExecute taints, not `unschedulable` or
  NoSchedule taints). A nodeSelector on `kubernetes.io/hostname` would also need a toleration
  of `node.kubernetes.io/unschedulable` and a working scheduler. The pod still tolerates the
  maintenance taint (`gpubot.io/maintenance`, NoSchedule), so it is welcome on the node
  however it gets there.
- One GPU requested, and `NVIDIA_VISIBLE_DEVICES=all`. nvidia-smi in a container lists only
  the GPUs the runtime gives that container. Requesting every GPU instead fails at admission
  as soon as the device plugin has taken one GPU out of allocatable ("requested number of
  devices unavailable"), so the test could never say which GPU is gone, and it would only
  repeat the gate's allocatable check. One GPU shows the device plugin still allocates; `all`
  lets the NVIDIA container runtime show the container every GPU of the node, numbered as on
  the host, which is the driver's view and not the device plugin's. Clusters hardened against
  that variable (`accept-nvidia-visible-devices-envvar-when-unprivileged = false`, or the
  volume-mounts / CDI device-list strategies) ignore it in unprivileged pods: there pass
  `request_all=True`, and the pod requests every expected GPU instead.
- `restartPolicy: Never` and `activeDeadlineSeconds`: it runs once, and a pod a crashed bot left
  behind stops by itself. It is labelled `app.kubernetes.io/managed-by: gpubot` and
  `gpubot.io/smoke-test: "true"` so that leftovers can be found, and it runs as an
  unprivileged user with the restricted Pod Security profile's settings.

`SmokeTests` is how the executor's health gate uses it (`remediation.smoke_test`): the gate
reads the node's last result when it is younger than `max_age_s`; when there is none, and
every other required item of the gate passes, it runs the pod and then reads that. A pod on
a node the gate refuses anyway would prove nothing and cost a pull. A failed result stands
for `max_age_s` too: the leader's follow-up asks every few seconds, and a node whose GPU is
gone should not get a new pod each time.

What this module must never do: leave its pod behind (it is deleted whatever happened), or call
a node healthy without seeing every GPU in the output (anything else is "fail" or "unknown").
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from bot.clock import Clock
from bot.config import SmokeTestSettings
from bot.errors import AlreadyExists, GpubotError, NotFound, TemporaryError
from bot.gate.items import CheckOutcome, ExternalEvidence, GateResult, health_gate
from bot.kube_objects import spec_of, status_of
from bot.model import ClusterFacts, Lang, NodeFacts
from bot.names import (
    GPUBOT,
    INCIDENT_ANNOTATION,
    MAINTENANCE_TAINT,
    MANAGED_BY_LABEL,
    NAMESPACE,
    SMOKE_TEST_LABEL,
)
from bot.ports import Cluster
from bot.texts import say

log = logging.getLogger(__name__)

DEFAULT_IMAGE = SmokeTestSettings().image
CONTAINER = "nvidia-smi"
GPU_RESOURCE = "nvidia.com/gpu"
_NAME_PREFIX = "gpubot-smoke-"
_GPU_LINE = re.compile(r"^GPU (\d+): (.*?) \(UUID: (GPU-[0-9A-Fa-f-]+)\)\s*$")
_FINISHED = ("Succeeded", "Failed")
_PLAIN_END = ("Completed", "Error")  # a container's end that says no more than its exit code


@dataclass(frozen=True)
class ListedGpu:
    """One `GPU N: NAME (UUID: GPU-...)` line of `nvidia-smi -L`."""

    index: int
    name: str
    uuid: str


def parse_gpu_list(output: str) -> tuple[list[ListedGpu], list[str]]:
    """`nvidia-smi -L` output → the GPUs it listed, and every other non-blank line (errors such
    as "Unable to determine the device handle ..."). MIG device lines, indented under their
    GPU, are neither."""
    gpus: list[ListedGpu] = []
    other: list[str] = []
    for line in output.splitlines():
        match = _GPU_LINE.match(line.strip())
        if match:
            gpus.append(ListedGpu(int(match.group(1)), match.group(2), match.group(3)))
        elif line.strip() and not line[:1].isspace():
            other.append(line.strip())
    return gpus, other


@dataclass(frozen=True)
class SmokeTest:
    """What one smoke test saw. `outcome` and `reason` read as a health-gate item; the gate
    (`health_gate.ExternalEvidence.smoke_test`) checks `listed` against the node's own count."""

    node: str
    pod: str
    expected: int
    """GPUs the caller said the node should have: indices 0 .. expected-1 must be listed."""
    outcome: CheckOutcome
    reason: str
    listed: tuple[int, ...] = ()
    phase: str = ""
    exit_code: int | None = None
    output: str = ""
    left_behind: str | None = None
    """Why the pod could not be deleted afterwards (None: deleted, or never created)."""
    key: str = ""
    """`reason`'s sentence in `bot.texts`, filled in with `values`; none for a reason that is
    only the evidence's own words (the kubelet's rejection) or that joins several findings."""
    values: dict[str, str] = field(default_factory=dict)

    @property
    def missing(self) -> tuple[int, ...]:
        return tuple(i for i in range(self.expected) if i not in self.listed)


def _said(key: str, **values: object) -> dict[str, Any]:
    """A reason and its sentence, as `SmokeTest` keeps them (`replace(result, **_said(...))`)."""
    shown = {k: str(v) for k, v in values.items()}
    return {"reason": say(Lang.EN, key, **shown), "key": key, "values": shown}


def _pod_name(node: str) -> str:
    """Unique, and at most 63 characters (the pod's hostname is its name, cut at 63)."""
    stem = node[: 63 - len(_NAME_PREFIX) - 7].rstrip("-.")
    return f"{_NAME_PREFIX}{stem}-{uuid.uuid4().hex[:6]}"


def smoke_test_pod(
    node: str,
    incident: str | None,
    image: str = DEFAULT_IMAGE,
    namespace: str = NAMESPACE,
    *,
    gpus: int | None = None,
    deadline_s: int = 300,
) -> dict[str, Any]:
    """The smoke-test Pod for `node`. `gpus=None` requests one GPU and shows the container every
    GPU (`NVIDIA_VISIBLE_DEVICES=all`); a number requests that many and shows only those."""
    annotations = {INCIDENT_ANNOTATION: incident} if incident else {}
    env = [{"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"}]
    if gpus is None:
        env.insert(0, {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"})
    count = str(1 if gpus is None else gpus)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": _pod_name(node),
            "namespace": namespace,
            "labels": {MANAGED_BY_LABEL: GPUBOT, SMOKE_TEST_LABEL: "true"},
            **({"annotations": annotations} if annotations else {}),
        },
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "activeDeadlineSeconds": max(1, deadline_s),
            "terminationGracePeriodSeconds": 5,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "tolerations": [
                {"key": MAINTENANCE_TAINT, "operator": "Exists", "effect": "NoSchedule"}
            ],
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65534,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": CONTAINER,
                    "image": image,
                    "command": ["nvidia-smi"],
                    "args": ["-L"],
                    "env": env,
                    "resources": {
                        "requests": {GPU_RESOURCE: count},
                        "limits": {GPU_RESOURCE: count},
                    },
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


def run_smoke_test(
    cluster: Cluster,
    node: str,
    expected_gpus: int,
    *,
    incident: str | None = None,
    timeout_s: float = 180.0,
    poll_s: float = 2.0,
    namespace: str = NAMESPACE,
    image: str = DEFAULT_IMAGE,
    request_all: bool = False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> SmokeTest:
    """Create the smoke-test pod on `node`, wait (at most `timeout_s`) for it to finish, read
    what nvidia-smi printed, and delete the pod. Passes only when the pod Succeeded and GPUs
    0 .. `expected_gpus`-1 are all listed; a pod that failed, was rejected or did not finish in
    time fails with the reason; one that could not be created or watched is "unknown"."""
    if expected_gpus < 1:
        return SmokeTest(node, "", expected_gpus, "unknown", **_said("smoke.no_count"))
    body = smoke_test_pod(
        node,
        incident,
        image,
        namespace,
        gpus=expected_gpus if request_all else None,
        deadline_s=math.ceil(timeout_s),
    )
    name = str(body["metadata"]["name"])
    try:
        cluster.create("Pod", namespace, body)
    except AlreadyExists as exc:  # the name is taken: not our pod, so not ours to delete
        return SmokeTest(
            node, name, expected_gpus, "unknown", **_said("smoke.not_created", error=exc)
        )
    except TemporaryError as exc:
        # The API may have created it before the answer was lost: clean up all the same.
        result = SmokeTest(
            node, name, expected_gpus, "unknown", **_said("smoke.not_created", error=exc)
        )
        return replace(result, left_behind=_delete(cluster, namespace, name))
    except GpubotError as exc:
        return SmokeTest(
            node, name, expected_gpus, "unknown", **_said("smoke.not_created", error=exc)
        )
    try:
        result = _await(
            cluster, node, namespace, name, expected_gpus, timeout_s, poll_s, clock, sleep
        )
    finally:
        left_behind = _delete(cluster, namespace, name)
    return replace(result, left_behind=left_behind)


def _await(
    cluster: Cluster,
    node: str,
    namespace: str,
    name: str,
    expected: int,
    timeout_s: float,
    poll_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> SmokeTest:
    deadline = clock() + timeout_s
    pod: dict[str, Any] = {}
    trouble = ""
    while True:
        try:
            pod = cluster.get("Pod", namespace, name)
            trouble = ""
        except NotFound:
            return SmokeTest(node, name, expected, "unknown", **_said("smoke.deleted"))
        except GpubotError as exc:
            trouble = str(exc)
        phase = str(status_of(pod).get("phase") or "Pending")
        if phase in _FINISHED:
            return _judge(cluster, node, namespace, name, expected, pod)
        remaining = deadline - clock()
        if remaining <= 0:
            waited = {"seconds": f"{timeout_s:g}", "state": _describe_waiting(pod)}
            said = (
                _said("smoke.timed_out_read", **waited, error=trouble)
                if trouble
                else _said("smoke.timed_out", **waited)
            )
            return SmokeTest(node, name, expected, "fail", phase=phase, **said)
        sleep(min(poll_s, remaining))


def _describe_waiting(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    parts = [f"phase {status.get('phase') or 'Pending'}"]
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            text = f"container {container.get('name')} waiting: {waiting['reason']}"
            parts.append(f"{text}: {waiting['message']}" if waiting.get("message") else text)
    node = spec_of(pod).get("nodeName")
    if node and not status.get("containerStatuses"):
        parts.append(f"not started by the kubelet on {node}")
    for condition in status.get("conditions") or []:
        if condition.get("status") == "False" and condition.get("message"):
            parts.append(f"{condition.get('type')}: {condition['message']}")
    return ", ".join(parts)


def _judge(
    cluster: Cluster, node: str, namespace: str, name: str, expected: int, pod: dict[str, Any]
) -> SmokeTest:
    status = pod.get("status") or {}
    phase = str(status.get("phase"))
    container: dict[str, Any] = next(
        (c for c in status.get("containerStatuses") or [] if c.get("name") == CONTAINER), {}
    )
    terminated = (container.get("state") or {}).get("terminated") or {}
    exit_code = terminated.get("exitCode")
    output, log_error = "", ""
    if terminated.get("containerID"):
        try:
            output = cluster.pod_log(namespace, name, CONTAINER)
        except GpubotError as exc:
            log_error = f"log not read: {exc}"
    gpus, errors = parse_gpu_list(output)
    listed = tuple(sorted({g.index for g in gpus}))
    missing = [i for i in range(expected) if i not in listed]
    result = SmokeTest(node, name, expected, "fail", "", listed, phase, exit_code, output)
    if phase == "Succeeded" and not missing:
        models = sorted({g.name for g in gpus})
        said = _said("smoke.passed", count=expected, models=", ".join(models))
        return replace(result, outcome="pass", **said)
    reasons: list[str] = []
    if gpus or (terminated and not errors):
        gone = ", ".join(str(i) for i in missing)
        reasons.append(
            f"nvidia-smi -L listed {len(listed)} of {expected} GPUs, missing GPU {gone}"
            if missing
            else f"nvidia-smi -L listed all {expected} GPUs"
        )
    if status.get("reason"):
        reasons.append(f"{status['reason']}: {status.get('message') or ''}".rstrip(": "))
    if terminated:
        ended = f"exit code {exit_code}"
        why = [str(terminated[k]) for k in ("reason", "message") if terminated.get(k)]
        if why and why[0] not in _PLAIN_END:
            ended += f" ({': '.join(why)})"
        reasons.append(ended)
    reasons += errors[:3]
    if log_error:
        reasons.append(log_error)
    judged = _judged(listed, expected, missing, status, terminated, exit_code, errors, log_error)
    if judged is not None:
        return replace(result, **judged)
    return replace(result, reason="; ".join(reasons) or f"the smoke-test pod {phase}")


def _judged(
    listed: tuple[int, ...],
    expected: int,
    missing: list[int],
    status: dict[str, Any],
    terminated: dict[str, Any],
    exit_code: object,
    errors: list[str],
    log_error: str,
) -> dict[str, Any] | None:
    """The catalogue's sentence for the failures a repair meets (GPUs missing from the listing,
    nvidia-smi ending with an error of its own), nvidia-smi's lines as it printed them; None
    for any other mix of findings, which stays in the English `_judge` joins."""
    why = [str(terminated[k]) for k in ("reason", "message") if terminated.get(k)]
    if not terminated or status.get("reason") or log_error or (why and why[0] not in _PLAIN_END):
        return None
    output = {"output": "; ".join(errors[:3])} if errors else {}
    key = "_said" if errors else ""
    if missing and listed:
        gone = ", ".join(str(i) for i in missing)
        return _said(
            f"smoke.missing{key}",
            listed=len(listed),
            count=expected,
            missing=gone,
            code=exit_code,
            **output,
        )
    if not listed and errors:
        return _said("smoke.exit_said", code=exit_code, **output)
    return None


def _delete(cluster: Cluster, namespace: str, name: str) -> str | None:
    try:
        cluster.delete_pod(namespace, name)
    except NotFound:
        return None
    except GpubotError as exc:
        log.warning("smoke-test pod %s/%s left behind: %s", namespace, name, exc)
        return str(exc)
    return None


class SmokeTests:
    """The smoke tests of one gpubot process: runs them for the health gate and remembers
    each node's last result (in memory: a new leader runs its own, which is what a stale
    result would have needed anyway)."""

    def __init__(
        self,
        cluster: Cluster,
        settings: SmokeTestSettings,
        clock: Clock,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.cluster = cluster
        self.settings = settings
        self.clock = clock
        self.sleep = sleep
        self._results: dict[str, tuple[datetime, SmokeTest]] = {}
        self._lock = threading.Lock()

    def recent(self, node: str) -> SmokeTest | None:
        """The node's last result, if younger than `max_age_s`."""
        with self._lock:
            found = self._results.get(node)
        if found is None:
            return None
        at, result = found
        if self.clock() - at > timedelta(seconds=self.settings.max_age_s):
            return None
        return result

    def run(self, node: str, expected_gpus: int) -> SmokeTest:
        """Runs the pod now and keeps its result for the node."""
        started = self.clock()
        result = run_smoke_test(
            self.cluster,
            node,
            expected_gpus,
            timeout_s=self.settings.timeout_s,
            namespace=self.settings.namespace,
            image=self.settings.image,
            request_all=self.settings.request_all,
            sleep=self.sleep,
        )
        log.info("smoke test on %s: %s (%s)", node, result.outcome, result.reason)
        with self._lock:
            self._results[node] = (started, result)
        return result

    def gate(
        self,
        node: NodeFacts,
        facts: ClusterFacts,
        evidence: ExternalEvidence,
        gpu_resource: str,
    ) -> GateResult:
        """The health gate with the smoke test required: a recent result, or one run now
        when it is the only item the gate still lacks."""
        recent = self.recent(node.name)
        evidence = replace(evidence, require_smoke_test=True, smoke_test=recent)
        result = health_gate(node, facts.pools, evidence, gpu_resource)
        others = [i for i in result.failing if i.name != "gpu-smoke-test"]
        if recent is not None or others:
            return _in_its_words(result, recent)
        expected = node.gpu.expected if node.gpu is not None else 0
        ran = self.run(node.name, expected)
        gated = health_gate(node, facts.pools, replace(evidence, smoke_test=ran), gpu_resource)
        return _in_its_words(gated, ran)


def _in_its_words(result: GateResult, smoke: SmokeTest | None) -> GateResult:
    """The gate's smoke-test item with the test's sentence, so that a person reads it in their
    language: the gate passes the test's reason on as it is, knowing only `SmokeResult`."""
    if smoke is None or not smoke.key:
        return result
    items = [
        replace(i, key=smoke.key, values=dict(smoke.values))
        if i.name == "gpu-smoke-test" and not i.key and i.reason == smoke.reason
        else i
        for i in result.items
    ]
    return replace(result, items=items)
