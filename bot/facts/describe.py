"""Node objects rebuilt from text: `kubectl describe nodes` and the `gpu_nodes.labels` list of
the GPU Operator's must-gather.

Why it exists: a must-gather bundle holds nodes only as text, never as YAML, and the facts read
Node objects. Each reader gives back the objects the API server would have returned, as far as
the text carries them.

The describe format is kubectl's `describeNode` (k8s.io/kubectl `pkg/describe/describe.go`,
read at kubernetes/kubectl dee3483a3d6a64c07fdf746caf80af446dee99ac): a tabwriter (padding 2)
aligns `Key:<TAB>value` lines; labels and taints continue on lines indented to the value column
(`printLabelsMultiline`, `printTaintsMultilineWithIndent`), `<none>` when empty; annotations
print `key: value`, or `key:` then the value's lines two spaces deeper, each cut at 138
characters with `...`, when key and value exceed 140 characters or the value has a newline;
`kubectl.kubernetes.io/last-applied-configuration` is never printed; times are RFC 1123 with a
numeric zone; the Conditions table is `Type Status LastHeartbeatTime LastTransitionTime Reason
Message`; `Capacity:` / `Allocatable:` list `  name:<TAB>quantity`; `System Info:` has fixed
field names (`Kube-Proxy Version` only from older kubectl).

What it must never do: invent what the text does not carry. Describe prints no taint
`timeAdded`, no uid, no resourceVersion, and cuts long annotations: those stay absent or cut.
A node known only from `gpu_nodes.labels` gets labels and no status at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from bot.errors import InputError
from bot.kube_objects import Obj

_NODE_NAME = re.compile(r"^Name:\s+(?P<name>\S+)\s*$")
_TOP_KEY = re.compile(r"^(?P<key>[A-Za-z][A-Za-z -]*):(?:\s+(?P<value>.*?))?\s*$")
_RFC1123Z = re.compile(
    r"^(?:[A-Z][a-z]{2}), (?P<day>\d{2}) (?P<mon>[A-Z][a-z]{2}) (?P<year>\d{4}) "
    r"(?P<h>\d{2}):(?P<m>\d{2}):(?P<s>\d{2}) (?P<tz>[+-]\d{4})$"
)
_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    )
}
_STAMP = r"[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} [+-]\d{4}"
# The fallback for a Conditions row whose columns do not line up with the header (text
# re-wrapped or re-spaced): Reason has no spaces, Message may.
_CONDITION_ROW = re.compile(
    rf"^\s+(?P<type>\S+)\s+(?P<status>True|False|Unknown)\s+(?P<heartbeat>{_STAMP})\s+"
    rf"(?P<transition>{_STAMP})(?:\s+(?P<reason>\S+))?(?:\s+(?P<message>.*?))?\s*$"
)
_CONDITION_COLUMNS = (
    "Type",
    "Status",
    "LastHeartbeatTime",
    "LastTransitionTime",
    "Reason",
    "Message",
)
_SYSTEM_INFO = {
    "Machine ID": "machineID",
    "System UUID": "systemUUID",
    "Boot ID": "bootID",
    "Kernel Version": "kernelVersion",
    "OS Image": "osImage",
    "Operating System": "operatingSystem",
    "Architecture": "architecture",
    "Container Runtime Version": "containerRuntimeVersion",
    "Kubelet Version": "kubeletVersion",
    "Kube-Proxy Version": "kubeProxyVersion",
}
_TAINT_EFFECTS = {"NoSchedule", "PreferNoSchedule", "NoExecute"}
# A Kubernetes object name (DNS-1123 subdomain), as `cut -d/ -f2` leaves it in gpu_nodes.labels.
_OBJECT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def rfc1123z_to_api(text: str) -> str | None:
    """`Thu, 14 Mar 2024 03:09:00 +0000` as the API writes times (`2024-03-14T03:09:00Z`);
    None for Go's zero time (`Mon, 01 Jan 0001 ...`, the API's null) or what is not one."""
    match = _RFC1123Z.match(text.strip())
    if match is None or match["mon"] not in _MONTHS or match["year"] == "0001":
        return None
    tz = match["tz"]
    offset = timedelta(hours=int(tz[1:3]), minutes=int(tz[3:5])) * (1 if tz[0] == "+" else -1)
    try:
        at = datetime(
            int(match["year"]),
            _MONTHS[match["mon"]],
            int(match["day"]),
            int(match["h"]),
            int(match["m"]),
            int(match["s"]),
            tzinfo=timezone(offset),
        )
    except ValueError:
        return None
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Block:
    """One top-level `Key:` of a node's description: its value and the lines under it."""

    key: str
    value: str
    line: int
    column: int
    """Where the value starts on the key's line (the tabwriter's value column)."""
    lines: list[tuple[int, str]] = field(default_factory=list)


def _blocks(lines: list[tuple[int, str]]) -> list[_Block]:
    blocks: list[_Block] = []
    for number, line in lines:
        if not line.strip():
            continue
        if line[0].isspace():
            if blocks:
                blocks[-1].lines.append((number, line))
            continue
        match = _TOP_KEY.match(line)
        if match is None:
            continue  # a line kubectl did not write (a warning pasted in): not ours to read
        value = match["value"] or ""
        column = len(line) - len(line[len(match["key"]) + 1 :].lstrip()) if value else 0
        blocks.append(_Block(match["key"], value, number, column))
    return blocks


def _listed(block: _Block) -> list[tuple[int, str]]:
    """The values of a multi-line field (labels, taints): the first on the key's line, the rest
    on the lines indented under it; none for `<none>`."""
    if block.value in ("", "<none>"):
        return []
    return [(block.line, block.value)] + [(n, line.strip()) for n, line in block.lines]


def _labels(block: _Block, where: str) -> dict[str, str]:
    labels = {}
    for number, text in _listed(block):
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise InputError(f"{where}:{number}", f"label {text!r} is not key=value")
        labels[key] = value  # a label key holds no '=': the first one separates
    return labels


def _annotations(block: _Block, where: str) -> dict[str, str]:
    if block.value in ("", "<none>"):
        return {}
    entries: list[tuple[int, int, str]] = [(block.line, block.column, block.value)]
    for number, line in block.lines:
        entries.append((number, len(line) - len(line.lstrip()), line.strip()))
    annotations: dict[str, str] = {}
    current: str | None = None
    column = block.column
    for number, indent, text in entries:
        if current is not None and indent > column:
            # A long or multi-line value: its lines sit two spaces deeper (kubectl cut each
            # at 138 characters; what it cut is lost).
            annotations[current] = "\n".join(filter(None, [annotations[current], text]))
            continue
        key, sep, value = text.partition(": ")
        if sep and key:
            annotations[key] = value
            current = None
        elif text.endswith(":"):
            current = text[:-1]
            annotations[current] = ""
        else:
            raise InputError(f"{where}:{number}", f"annotation {text!r} is not key: value")
    return annotations


def _taints(block: _Block, where: str) -> list[Obj]:
    taints = []
    for number, text in _listed(block):
        # Taint.ToString: key=value:effect, or key:effect; neither key nor value holds ':'.
        rest, _, effect = text.rpartition(":")
        key, sep, value = rest.partition("=")
        if not key or effect not in _TAINT_EFFECTS:
            raise InputError(f"{where}:{number}", f"taint {text!r} is not key[=value]:effect")
        taint: Obj = {"key": key, "effect": effect}
        if sep:
            taint["value"] = value
        taints.append(taint)
    return taints


def _pairs(block: _Block, where: str) -> list[tuple[str, str]]:
    """`  name:<TAB>value` lines (Capacity, Allocatable, Addresses, System Info)."""
    pairs = []
    for number, line in block.lines:
        key, sep, value = line.strip().partition(":")
        if not sep or not key:
            raise InputError(
                f"{where}:{number}", f"{block.key}: {line.strip()!r} is not name: value"
            )
        pairs.append((key.strip(), value.strip()))
    return pairs


def _column_starts(header: str) -> list[int] | None:
    starts = []
    position = 0
    for name in _CONDITION_COLUMNS:
        found = re.compile(rf"(?<!\S){name}(?!\S)").search(header, position)
        if found is None:
            return None
        starts.append(found.start())
        position = found.end()
    return starts


def _sliced(line: str, starts: list[int]) -> dict[str, str] | None:
    cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    row = dict(
        zip(("type", "status", "heartbeat", "transition", "reason", "message"), cells, strict=True)
    )
    if row["status"] not in ("True", "False", "Unknown") or not row["type"]:
        return None
    if line[starts[1] - 1 : starts[1]].strip() or line[starts[2] - 1 : starts[2]].strip():
        return None  # a cell runs into the next column: the columns do not line up
    for stamp in ("heartbeat", "transition"):
        if not re.fullmatch(_STAMP, row[stamp]):
            return None
    return row


def _conditions(block: _Block, where: str) -> list[Obj]:
    rows = [(n, line) for n, line in block.lines if line.strip()]
    if not rows:
        return []
    header_number, header = rows[0]
    starts = _column_starts(header)
    if starts is None:
        raise InputError(f"{where}:{header_number}", "Conditions: no Type/Status/... header")
    conditions: list[Obj] = []
    for number, line in rows[1:]:
        if set(line.strip()) <= {"-", " "}:
            continue
        row = _sliced(line, starts)
        if row is None:
            fallback = _CONDITION_ROW.match(line)
            row = fallback.groupdict(default="") if fallback else None
        if row is None:
            if conditions:
                # A message that went on over a line break.
                previous = conditions[-1]
                previous["message"] = f"{previous.get('message', '')}\n{line.strip()}".strip()
                continue
            raise InputError(f"{where}:{number}", f"Conditions: cannot read row {line.strip()!r}")
        condition: Obj = {"type": row["type"], "status": row["status"]}
        for key, api_key in (
            ("heartbeat", "lastHeartbeatTime"),
            ("transition", "lastTransitionTime"),
        ):
            stamp = rfc1123z_to_api(row[key])
            if stamp:
                condition[api_key] = stamp
        if row["reason"]:
            condition["reason"] = row["reason"]
        if row["message"]:
            condition["message"] = row["message"]
        conditions.append(condition)
    return conditions


def _node(name: str, lines: list[tuple[int, str]], where: str) -> Obj:
    metadata: Obj = {"name": name}
    spec: Obj = {}
    status: Obj = {}
    for block in _blocks(lines):
        key = block.key
        if key == "Labels":
            labels = _labels(block, where)
            if labels:
                metadata["labels"] = labels
        elif key == "Annotations":
            annotations = _annotations(block, where)
            if annotations:
                metadata["annotations"] = annotations
        elif key == "CreationTimestamp":
            created = rfc1123z_to_api(block.value)
            if created:
                metadata["creationTimestamp"] = created
        elif key == "Taints":
            taints = _taints(block, where)
            if taints:
                spec["taints"] = taints
        elif key == "Unschedulable":
            if block.value == "true":
                spec["unschedulable"] = True  # the API leaves out false
        elif key == "PodCIDR":
            spec["podCIDR"] = block.value
        elif key == "PodCIDRs":
            spec["podCIDRs"] = block.value.split(",")
        elif key == "ProviderID":
            spec["providerID"] = block.value
        elif key == "Conditions":
            status["conditions"] = _conditions(block, where)
        elif key == "Addresses":
            status["addresses"] = [{"type": t, "address": a} for t, a in _pairs(block, where)]
        elif key in ("Capacity", "Allocatable"):
            status[key.lower()] = dict(_pairs(block, where))
        elif key == "System Info":
            info = {_SYSTEM_INFO[k]: v for k, v in _pairs(block, where) if k in _SYSTEM_INFO and v}
            status["nodeInfo"] = info
        # Roles (from labels), Lease, Non-terminated Pods, Allocated resources, Events and
        # Node-Local ResourceSlices are not parts of the Node object.
    node: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": metadata}
    node["spec"] = spec
    node["status"] = status
    return node


def nodes_from_describe(text: str, where: str) -> list[Obj]:
    """The Node objects of `kubectl describe nodes` output, in its order. Empty text (no node
    matched the selector) gives []; text with no `Name:` line is not describe output."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if _NODE_NAME.match(line)]
    if not starts:
        if text.strip():
            raise InputError(where, "no 'Name:' line: not `kubectl describe nodes` output")
        return []
    nodes = []
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(lines)
        match = _NODE_NAME.match(lines[start])
        assert match is not None
        numbered = [(n + 1, lines[n]) for n in range(start + 1, end)]
        nodes.append(_node(match["name"], numbered, where))
    return nodes


def labels_from_must_gather(
    text: str, where: str = "gpu_nodes.labels"
) -> dict[str, dict[str, str]]:
    """Labels by node from must-gather's `gpu_nodes.labels`: a node name line, `- key=value`
    lines, a blank line. The script lists a node once per NFD PCI label it carries; a later
    listing replaces an earlier one (each is a separate `kubectl get`, the last is newest).

    The script pipes `kubectl get node -ojsonpath={.metadata.labels}` through `tr : =`, which
    turned the JSON's `"key":"value"` into `key=value` and would turn every ':' of a value
    into '='. Kubernetes label syntax allows neither ':' nor '=' in a key or a value, so for
    real labels the first '=' separates key and value and nothing else needs undoing. A
    further '=' can only come from text that is not a label, and could have been ':' or '=':
    it is left as read, not guessed.
    """
    nodes: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line == "{":  # `{` is what an empty label map leaves behind
            continue
        if line.startswith("- "):
            if current is None:
                raise InputError(f"{where}:{number}", "a label line before any node name")
            key, sep, value = line[2:].partition("=")
            if not sep or not key.strip():
                raise InputError(f"{where}:{number}", f"label {line[2:]!r} is not key=value")
            current[key.strip()] = value.strip()
        elif _OBJECT_NAME.match(line):
            current = {}
            nodes[line] = current
        else:
            raise InputError(
                f"{where}:{number}", f"neither a node name nor '- key=value': {line!r}"
            )
    return nodes
