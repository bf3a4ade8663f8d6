"""Pending pods and why the scheduler left them: its `FailedScheduling` messages parsed into
counted reasons (insufficient GPUs, taints, affinity, quota, unknown resources).

Why it exists: the runbook's third question (why didn't workloads go?) is answered from these.
What it must never do: guess a reason the scheduler did not give.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime

from bot.config import Settings
from bot.facts.nodes import MIG_RESOURCE_PREFIX
from bot.facts.snapshots import Index, Snapshot, age_s
from bot.kube_objects import (
    controller_of,
    event_time,
    meta,
    name_of,
    namespace_of,
    parse_time,
    pod_requests,
    spec_of,
)
from bot.model import (
    NodeFacts,
    PendingPod,
    ReasonKind,
    SchedulingReason,
)

_AVAILABLE = re.compile(r"^\d+/\d+ nodes are available: ")


_COUNTED = re.compile(r"^(\d+) (.*)$")


def split_scheduler_message(message: str) -> list[tuple[int, str]]:
    """`0/12 nodes are available: 4 Insufficient nvidia.com/gpu, 3 node(s) had ...` -> parts.

    Taint texts hold `{key: value}` with commas possible inside braces, so the split is
    brace-aware. The preemption sentence repeats the counts and is dropped.
    """
    body = message.split(" preemption:", 1)[0].strip()
    body = _AVAILABLE.sub("", body).rstrip(".")
    parts: list[str] = []
    depth = 0
    current = ""
    for char in body:
        depth += char == "{"
        depth -= char == "}"
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current.strip())
    counted = []
    for part in parts:
        match = _COUNTED.match(part)
        counted.append((int(match.group(1)), match.group(2)) if match else (0, part))
    return counted


def classify_reason(text: str, offered: set[str], gpu_resource: str) -> ReasonKind:
    if text.startswith("Insufficient "):
        resource = text.removeprefix("Insufficient ").strip()
        if "/" in resource and resource not in offered:
            return "unknown-resource"
        if resource == gpu_resource or resource.startswith(MIG_RESOURCE_PREFIX):
            return "insufficient-gpu"
        return "insufficient-other"
    if "untolerated taint" in text:
        return "untolerated-taint"
    if "affinity" in text or "selector" in text:
        return "affinity-selector"
    if "were unschedulable" in text:
        return "unschedulable"
    if "quota" in text:
        return "quota"
    return "other"


def pending_pods(
    snapshot: Snapshot,
    index: Index,
    offered: set[str],
    nodes: Mapping[str, NodeFacts],
    now: datetime,
    settings: Settings,
) -> list[PendingPod]:
    pending = []
    cordon_times = {
        name: now.timestamp() - facts.cordoned_for_s
        for name, facts in nodes.items()
        if facts.cordoned_for_s is not None
    }
    for pod in snapshot.pods:
        status = pod.get("status") or {}
        if status.get("phase") != "Pending" or spec_of(pod).get("nodeName"):
            continue
        requests = {k: v for k, v in pod_requests(pod).items() if k.startswith("nvidia.com/")}
        if not requests:
            continue
        ns, name = namespace_of(pod), name_of(pod)
        scheduling = [
            e for e in index.pod_events.get((ns, name), []) if e.get("reason") == "FailedScheduling"
        ]
        latest = max(scheduling, key=lambda e: event_time(e) or now, default=None)
        message = str(latest.get("message", "")) if latest else None
        reasons = [
            SchedulingReason(
                kind=classify_reason(text, offered, settings.gpu_resource), count=n, text=text
            )
            for n, text in (split_scheduler_message(message) if message else [])
        ]
        controller = controller_of(pod)
        generate_name = str(meta(pod).get("generateName") or "")
        evicted_from = None
        for host, kills in index.kill_events_by_host.items():
            if host not in cordon_times:
                continue
            for kill in kills:
                killed = str((kill.get("involvedObject") or {}).get("name", ""))
                when = event_time(kill)
                same_owner = killed == name or (generate_name and killed.startswith(generate_name))
                if same_owner and when is not None and when.timestamp() >= cordon_times[host]:
                    evicted_from = host
        pending.append(
            PendingPod(
                name=name,
                namespace=ns,
                owner=f"{controller[0]}/{controller[1]}" if controller else None,
                requests=requests,
                pending_s=age_s(now, parse_time(meta(pod).get("creationTimestamp"))) or 0,
                reasons=reasons,
                message=message,
                unoffered_resources=sorted(r for r in requests if r not in offered),
                evicted_from=evicted_from,
            )
        )
    for event in index.owner_events:
        message = str(event.get("message", ""))
        if event.get("reason") != "FailedCreate" or "exceeded quota" not in message:
            continue
        if "nvidia.com/" not in message:
            continue
        involved = event.get("involvedObject") or {}
        # A controller retries for as long as the quota is full: pending since the first try.
        when = parse_time(event.get("firstTimestamp")) or event_time(event)
        pending.append(
            PendingPod(
                name=f"{involved.get('name', '')}-*",
                namespace=str(involved.get("namespace", "")),
                owner=f"{involved.get('kind', '')}/{involved.get('name', '')}",
                requests={},
                pending_s=age_s(now, when) or 0,
                reasons=[SchedulingReason(kind="quota", count=0, text=message)],
                message=message,
                unoffered_resources=[],
                evicted_from=None,
            )
        )
    return pending
