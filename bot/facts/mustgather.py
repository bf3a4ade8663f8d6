"""A GPU Operator must-gather folder (NVIDIA/gpu-operator `hack/must-gather.sh`) read into the
objects and signals a snapshot is made of, with an account of what was read, what could not
be, and what the bundle never holds.

Why it exists: the bundle is what a customer or another team hands over when nobody can reach
the cluster; `gpubot diagnose` should read it as it reads a live snapshot.

What it reads: `gpu_nodes.descr` (Nodes, `bot.facts.describe`), `gpu_nodes.labels` (labels
of the GPU nodes describe left out: the script describes only nodes labelled
`nvidia.com/gpu.present=true`), `gpu_operand_pods.yaml`, `gpu_operator_pod.yaml`,
`gpu_operand_ds.yaml`, `cluster_policy.yaml` / `cluster_policy.missing`, the kernel log in each
`nvidia-bug-report_<node>.log.gz` (`bot.facts.kernel`), the nvidia-smi table in
`gpu_device_usage_<node>.log` (GPU indexes of the Xids, when it has one), `must-gather.log`
(why a bug report is absent) and the operand pods' logs (see `_attach_log_messages`). The
`.status` files repeat the YAML and describe text as tables, the `.descr` files of pods and
DaemonSets repeat their YAML: not read.

What it must never do: guess. A part it cannot read is listed in `skipped`, a part the bundle
does not hold in `missing`, and neither is filled in from elsewhere. Nor read a file past the
limits of `bot.config.InputLimits`, or YAML that `bot.yamlfiles` refuses (aliases that expand
past what Kubernetes reads, nesting past its depth): such a file refuses the whole bundle
(InputError), as a note would bury the setting that raises the limit, and a bundle holding a
file built to take the machine is not one to diagnose.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from bot.config import InputLimits
from bot.errors import InputError
from bot.facts.describe import labels_from_must_gather, nodes_from_describe
from bot.facts.kernel import (
    LogText,
    gpu_indexes,
    gunzip_members,
    kernel_signals,
    report_time,
)
from bot.input_files import Limit, check_size, read_stream_within
from bot.kube_objects import Obj, labels_of, name_of, namespace_of, spec_of, status_of
from bot.model import Signal
from bot.yamlfiles import InvalidYaml, load_document

GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
_BUG_REPORT = re.compile(r"^nvidia-bug-report_(?P<node>.+?)\.log(?:\.gz)?$")
_DEVICE_USAGE = "gpu_device_usage_{node}.log"
# The driver pods must-gather asks for a bug report (its `-l` selectors).
_DRIVER_POD_LABELS = (
    ("app", "nvidia-driver-daemonset"),
    ("app.kubernetes.io/component", "nvidia-driver"),
    ("app", "nvidia-vgpu-manager-daemonset"),
    ("openshift.driver-toolkit", None),
)
# `kubectl logs --prefix [--timestamps]`: `[pod/NAME/CONTAINER] [RFC 3339 time ]line`.
_LOG_LINE = re.compile(
    r"^\[pod/(?P<pod>[^/\]]+)/(?P<container>[^\]]+)\] "
    r"(?:\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}) )?(?P<text>.*)$"
)
_ERROR_LINE = re.compile(
    r"^[EF]\d{4} |\b(?:error|fatal|panic|failed|failure)\b|level=(?:error|fatal)", re.IGNORECASE
)
# What the kubelet keeps of a log as a termination message (FallbackToLogsOnError): at most
# 80 lines and 2048 bytes; we keep the last few error lines within that.
_LOG_MESSAGE_LINES = 3
_LOG_MESSAGE_BYTES = 2048


@dataclass
class Bundle:
    """What a must-gather folder holds, read as objects and signals."""

    objects: list[Obj] = field(default_factory=list)
    """Nodes (from describe, or from labels alone: see `missing`), Pods and DaemonSets of the
    operator namespace, the ClusterPolicy when there is one."""
    signals: list[Signal] = field(default_factory=list)
    """Xids of the kernel log in each node's bug report."""
    read: list[str] = field(default_factory=list)
    """The files it used."""
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """(file, why) for parts it could not read."""
    missing: list[str] = field(default_factory=list)
    """What the bundle does not hold, and so is not known."""
    collected_at: datetime | None = None
    """When must-gather ran, as its bug reports state it (the latest `Date:` line in UTC);
    None when none says. The moment to diagnose the bundle at: its ages are counted to it."""


def _plain(value: Any) -> Any:
    """YAML as the API's JSON: unquoted times become RFC 3339 strings, keys strings."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        text = value.isoformat()
        return text.replace("+00:00", "Z") if value.tzinfo else text + "Z"
    if isinstance(value, date):
        return value.isoformat()
    return value


class _Reader:
    """Owns the bundle being read from one must-gather folder, and what was skipped and why.
    Never: fails on a file it cannot read (it is skipped and said), but on one over its
    limits (it raises: see the module's docstring)."""

    def __init__(self, folder: Path, limits: InputLimits) -> None:
        self.folder = folder
        self.limits = limits
        self.bundle = Bundle()

    def skip(self, name: str, reason: str) -> None:
        self.bundle.skipped.append((name, reason))

    def text(self, name: str) -> str | None:
        """A file's text (bytes that are not UTF-8 replaced), None when absent or unreadable."""
        path = self.folder / name
        if not path.is_file():
            return None
        data = self.read(path, self.limits.must_gather_file())
        return None if data is None else data.decode("utf-8", errors="replace")

    def read(self, path: Path, limit: Limit) -> bytes | None:
        """A file's bytes within `limit`; None (skipped and said) when it cannot be read."""
        check_size(path, limit)  # over it: the bundle is refused (the module's docstring)
        try:
            with path.open("rb") as file:
                return read_stream_within(file, limit, str(path))
        except OSError as exc:
            self.skip(path.name, exc.strerror or str(exc))
            return None

    def yaml_objects(self, name: str, kinds: tuple[str, ...]) -> list[Obj]:
        """The objects of a `kubectl get -o yaml` file (one object or a List)."""
        text = self.text(name)
        if text is None:
            return []
        try:
            raw = _plain(load_document(text, str(self.folder / name)))
        except InvalidYaml as exc:
            line = f" at line {exc.line}" if exc.line else ""
            self.skip(name, f"invalid YAML{line}: {exc.problem}")
            return []
        if raw is None:
            self.skip(name, "empty")
            return []
        is_list = (
            isinstance(raw, Mapping)
            and str(raw.get("kind") or "List").endswith("List")
            and "items" in raw
        )
        items = raw.get("items") if is_list else [raw]
        if not isinstance(items, list) or not all(isinstance(i, Mapping) for i in items):
            self.skip(name, "neither a Kubernetes object nor a List of them")
            return []
        objects = []
        for index, item in enumerate(items):
            where = f"{name}: items[{index}]" if is_list else name
            if item.get("kind") not in kinds:
                self.skip(where, f"expected {' or '.join(kinds)}, found {item.get('kind')}")
            elif not name_of(item):
                self.skip(where, "metadata.name missing")
            else:
                objects.append(dict(item))
        if objects:
            self.bundle.read.append(name)
        return objects


def read_must_gather(folder: Path, limits: InputLimits | None = None) -> Bundle:
    """Read a must-gather folder. A folder with neither `gpu_nodes.labels` nor
    `gpu_operand_pods.yaml` is not one (InputError); any other part that cannot be read is
    listed in `skipped` and the rest read. A file over `limits` (the defaults when None), or
    YAML that expands past Kubernetes' limit, is an InputError naming it."""
    if not folder.is_dir():
        raise InputError(str(folder), "not a GPU Operator must-gather folder: not a directory")
    if (
        not (folder / "gpu_nodes.labels").is_file()
        and not (folder / "gpu_operand_pods.yaml").is_file()
    ):
        raise InputError(
            str(folder),
            "not a GPU Operator must-gather folder: neither gpu_nodes.labels nor "
            "gpu_operand_pods.yaml is in it",
        )
    reader = _Reader(folder, limits or InputLimits())
    bundle = reader.bundle
    nodes = _nodes(reader)
    pods = _pods(reader)
    daemonsets = reader.yaml_objects("gpu_operand_ds.yaml", ("DaemonSet",))
    policy = _cluster_policy(reader)
    _attach_log_messages(reader, pods)
    bundle.objects = [*nodes, *pods, *daemonsets, *policy]
    _bug_reports(reader, nodes, pods)
    namespaces = sorted({namespace_of(p) for p in pods if namespace_of(p)})
    bundle.missing += [
        "no events: must-gather does not collect them",
        "no pods outside "
        + (f"namespace {', '.join(namespaces)}" if namespaces else "the operator namespace")
        + ": must-gather collects only the operator's (gpu_nodes.descr names the others "
        "without their state)",
        "no PodDisruptionBudgets: must-gather does not collect them",
        "no nodes without NVIDIA PCI labels: must-gather collects only GPU nodes",
    ]
    return bundle


def _nodes(reader: _Reader) -> list[Obj]:
    bundle = reader.bundle
    described: list[Obj] = []
    descr = reader.text("gpu_nodes.descr")
    if descr is None:
        bundle.missing.append("gpu_nodes.descr: no node status (file absent)")
    else:
        try:
            described = nodes_from_describe(descr, "gpu_nodes.descr")
            bundle.read.append("gpu_nodes.descr")
        except InputError as exc:
            reader.skip(exc.where, exc.message)
    labelled: dict[str, dict[str, str]] = {}
    text = reader.text("gpu_nodes.labels")
    if text is not None:
        try:
            labelled = labels_from_must_gather(text, "gpu_nodes.labels")
            bundle.read.append("gpu_nodes.labels")
        except InputError as exc:
            reader.skip(exc.where, exc.message)
    names = {name_of(n) for n in described}
    nodes = list(described)
    for name, labels in labelled.items():
        if name in names:
            continue
        why = (
            "not in gpu_nodes.descr"
            if labels.get(GPU_PRESENT_LABEL) == "true" and descr is not None
            else f"not labelled {GPU_PRESENT_LABEL}=true"
        )
        bundle.missing.append(f"node {name}: labels only, no status ({why})")
        nodes.append(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
        )
    return nodes


def _pods(reader: _Reader) -> list[Obj]:
    pods = reader.yaml_objects("gpu_operand_pods.yaml", ("Pod",))
    seen = {(namespace_of(p), name_of(p)) for p in pods}
    for pod in reader.yaml_objects("gpu_operator_pod.yaml", ("Pod",)):
        if (namespace_of(pod), name_of(pod)) not in seen:  # it is in the operand list too
            pods.append(pod)
    return pods


def _cluster_policy(reader: _Reader) -> list[Obj]:
    if (reader.folder / "cluster_policy.yaml").is_file():
        policies = reader.yaml_objects("cluster_policy.yaml", ("ClusterPolicy",))
        if not policies:
            reader.bundle.missing.append("no ClusterPolicy: cluster_policy.yaml could not be read")
        return policies
    if (reader.folder / "cluster_policy.missing").is_file():
        reader.bundle.missing.append("no ClusterPolicy (cluster_policy.missing)")
    else:
        reader.bundle.missing.append(
            "no ClusterPolicy: neither cluster_policy.yaml nor cluster_policy.missing"
        )
    return []


def _log_tail(text: str, container: str) -> str | None:
    lines = []
    for raw in text.splitlines():
        match = _LOG_LINE.match(raw)
        if match is None or match["container"] != container:
            continue
        line = match["text"].strip()
        if line and _ERROR_LINE.search(line):
            lines.append(line)
    message = "\n".join(lines[-_LOG_MESSAGE_LINES:])
    encoded = message.encode()
    if len(encoded) > _LOG_MESSAGE_BYTES:
        message = encoded[-_LOG_MESSAGE_BYTES:].decode(errors="ignore")
    return message or None


def _attach_log_messages(reader: _Reader, pods: list[Obj]) -> None:
    """A crash-looping container's last error lines, from its log, as the termination message
    of its last run when the pod's YAML has none.

    Why: the facts read a failing container's `lastState.terminated.message` (what the on-call
    reads first, e.g. `nvml: GPU is lost`), and the kubelet itself fills that field from the
    log's tail when a container asks for it (`terminationMessagePolicy:
    FallbackToLogsOnError`); the GPU Operator's containers do not, so the YAML has no message
    and the log is where the reason is. A message the YAML has is never replaced. The log of
    a waiting container is its last run's (`kubectl logs`), of a running one the run before
    (`--previous`); only error lines are kept (klog E/F, `level=error`, error/failed/fatal).
    """
    for pod in pods:
        name = name_of(pod)
        statuses = [
            *(status_of(pod).get("initContainerStatuses") or []),
            *(status_of(pod).get("containerStatuses") or []),
        ]
        for status in statuses:
            if not isinstance(status, dict):
                continue
            last = (status.get("lastState") or {}).get("terminated")
            if not isinstance(last, dict) or last.get("message") or last.get("exitCode") == 0:
                continue
            waiting = bool((status.get("state") or {}).get("waiting"))
            files = [f"gpu_operand_pod_{name}.log"] if waiting else []
            files.append(f"gpu_operand_pod_{name}.previous.log")
            for file in files:
                text = reader.text(file)
                message = _log_tail(text, str(status.get("name"))) if text else None
                if message:
                    last["message"] = message
                    if file not in reader.bundle.read:
                        reader.bundle.read.append(file)
                    break


def _driver_pods_on(node: str, pods: list[Obj]) -> list[Obj]:
    found = []
    for pod in pods:
        labels = labels_of(pod)
        if spec_of(pod).get("nodeName") == node and any(
            key in labels and (value is None or labels[key] == value)
            for key, value in _DRIVER_POD_LABELS
        ):
            found.append(pod)
    return found


def _not_running(pod: Obj) -> str | None:
    """Why a driver pod's containers are not running, None when they are."""
    for status in status_of(pod).get("containerStatuses") or []:
        waiting = (status.get("state") or {}).get("waiting")
        if waiting is not None or not (status.get("state") or {}).get("running"):
            reason = (waiting or {}).get("reason") or "not running"
            return f"its driver pod {name_of(pod)} was not running: {reason}"
    phase = status_of(pod).get("phase")
    return None if phase == "Running" else f"its driver pod {name_of(pod)} is {phase}"


def _bug_reports(reader: _Reader, nodes: list[Obj], pods: list[Obj]) -> None:
    bundle = reader.bundle
    reported: set[str] = set()
    for path in sorted(reader.folder.iterdir()):
        match = _BUG_REPORT.match(path.name)
        if match is None or not path.is_file():
            continue
        node = match["node"]
        limit = reader.limits.kernel_log()
        data = reader.read(path, limit)
        if data is None:
            continue
        log = (
            gunzip_members(data, str(path), limit)
            if path.name.endswith(".gz")
            else LogText(data.decode("utf-8", errors="replace"))
        )
        if log.problem:
            reader.skip(path.name, log.problem)
        if not log.text.strip():
            continue
        reported.add(node)
        bundle.read.append(path.name)
        if log.problem:
            bundle.missing.append(
                f"Xids of {node} after the cut: {path.name} is truncated, its kernel log may "
                "be incomplete"
            )
        usage_name = _DEVICE_USAGE.format(node=node)
        usage = reader.text(usage_name)
        gpus = gpu_indexes(usage) if usage else {}
        if gpus:
            bundle.read.append(usage_name)
        bundle.signals += kernel_signals(log.text, node, path.name, gpus=gpus)
        written = report_time(log.text)
        if written is not None and (bundle.collected_at is None or written > bundle.collected_at):
            bundle.collected_at = written
    log_text = reader.text("must-gather.log") or ""
    for node in nodes:
        name = name_of(node)
        if name in reported:
            continue
        reasons = []
        if f"Failed to collect nvidia-bug-report from {name}" in log_text:
            reasons.append(f'must-gather.log: "Failed to collect nvidia-bug-report from {name}"')
        elif f"Failed to save nvidia-bug-report from {name}" in log_text:
            reasons.append(f'must-gather.log: "Failed to save nvidia-bug-report from {name}"')
        drivers = _driver_pods_on(name, pods)
        if not drivers:
            reasons.append(
                "no operator driver pod on it: must-gather takes bug reports from driver pods"
            )
        reasons += [r for pod in drivers if (r := _not_running(pod))]
        why = f" ({'; '.join(reasons)})" if reasons else ""
        bundle.missing.append(f"no bug report for {name}{why}: its kernel Xids are not known")
