"""Whole clusters, as one `kubectl get ... -A -o json` List: the ground rule tests, the demo
and the benchmarks stand on. `healthy_cluster` must give no diagnosis at all, and must never
change without the shipped snapshot it is compared with.

`owning_jobs` adds what a snapshot of nodes, pods, events, PDBs and DaemonSets leaves out but
a running cluster holds: the Job objects the pods' owner references name (created when their
oldest pod was, as the Job controller creates pods right after the Job), so `kubectl get jobs`
and `describe pod`'s `Controlled By: Job/...` agree. The simulator loads it beside the
scenario (`gpusim.launching`); the snapshot itself stays as shipped."""

from __future__ import annotations

import json
import random
import sys
from datetime import UTC, datetime, timedelta

from gpusim import objects
from gpusim.objects import Json

FIXTURE_NOW = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)
CHECKPOINT_ANNOTATION = "gpubot.io/last-checkpoint"
"""When a training pod last saved a checkpoint (RFC 3339), as its framework reports it:
what a drain's risk is judged by (issue "Remediation")."""
SCENARIOS = {
    "gpu-pool": {"gpu_nodes": 4, "pods_per_node": 2},
    "large": {"gpu_nodes": 5000, "pods_per_node": 13},
}


def healthy_cluster(
    gpu_nodes: int = 4,
    now: datetime = FIXTURE_NOW,
    *,
    pool: str = "a100-east",
    pods_per_node: int = 2,
    prefix: str = "gpu-a",
) -> Json:
    """`gpu_nodes` 8-GPU nodes of one pool, fully used by training and inference, plus one
    CPU node; every GPU Operator component running; PDBs that allow one disruption."""
    items: list[Json] = [objects.node("cpu-1", "system", now, gpu=False)]
    jobs = max(1, gpu_nodes // 2)
    per_job_nodes = max(1, gpu_nodes // jobs)
    for index in range(gpu_nodes):
        name = f"{prefix}{index + 1}"
        items.append(objects.node(name, pool, now))
        items.extend(objects.operator_pods(name, now))
        job_index = index // per_job_nodes
        job = f"train-llm-{job_index}"
        # Each node runs one 8-GPU worker. Even-numbered jobs checkpoint every 30 minutes
        # (the last one 12 minutes ago); odd-numbered jobs never do: a drain costs them work.
        worker = index % per_job_nodes
        worker_pod = objects.pod(
            f"{job}-worker-{worker}",
            "ml",
            name,
            now,
            labels={"job-name": job, "training.kubeflow.org/replica-index": str(worker)},
            owner_ref=objects.owner("Job", job, "batch/v1"),
            image="nvcr.io/nvidia/pytorch:24.03-py3",
            gpus=8 if pods_per_node < 3 else 4,
            age=timedelta(hours=20),
            grace=120,
            generate_name=f"{job}-worker-",
            restart_policy="OnFailure",
            host_ip=objects.node_ip(name),
        )
        if job_index % 2 == 0:
            worker_pod["metadata"]["annotations"] = {
                CHECKPOINT_ANNOTATION: objects.ts(now - timedelta(minutes=12))
            }
        items.append(worker_pod)
        for extra in range(max(0, pods_per_node - 1)):
            items.append(
                objects.pod(
                    f"metrics-agent-{name}-{extra}",
                    "monitoring",
                    name,
                    now,
                    labels={"app": "metrics-agent"},
                    owner_ref=objects.owner("ReplicaSet", f"metrics-agent-{extra}"),
                    age=timedelta(days=5),
                    generate_name=f"metrics-agent-{name}-",
                    host_ip=objects.node_ip(name),
                )
            )
    for job_index in range(jobs):
        items.append(
            objects.pdb(
                f"train-llm-{job_index}-pdb",
                "ml",
                {"job-name": f"train-llm-{job_index}"},
                min_available=max(0, per_job_nodes - 1),
                healthy=per_job_nodes,
            )
        )
    # As the GPU Operator does: each DaemonSet follows its gpu.deploy.<component> label, which
    # is how mig-manager makes the device plugin, GFD, dcgm-exporter and validator vanish.
    for ds, deploy in objects.OPERATOR_DAEMONSETS:
        items.append(
            objects.daemonset(
                ds, objects.GPU_OPERATOR_NS, gpu_nodes, f"nvidia.com/gpu.deploy.{deploy}"
            )
        )
    items.append(
        objects.event(
            "Node",
            f"{prefix}1",
            "",
            "NodeReady",
            f"Node {prefix}1 status is now: NodeReady",
            now - timedelta(days=30),
            host=f"{prefix}1",
        )
    )
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


FLEET_FAULTS = ("zero-capacity", "xid-alert", "cordoned", "driver-drift", "not-ready")
_FLEET_SHARES = list(zip(FLEET_FAULTS, (0.02, 0.04, 0.06, 0.065, 0.07), strict=True))
"""Each fault with the upper end of its slice of [0, 1): 2%, 2%, 2%, 0.5%, 0.5% of the nodes."""


def fleet_cluster(
    gpu_nodes: int, pods_per_node: int = 13, seed: int = 18, now: datetime = FIXTURE_NOW
) -> tuple[Json, Json]:
    """A large `healthy_cluster` with about 2% of its GPU nodes broken in each of the first
    three ways of `FLEET_FAULTS` and 0.5% in the last two (which nodes: drawn from `seed`),
    every PDB at zero disruptions allowed; and the Alertmanager webhook payload of its Xid
    alerts. The fleet benchmarks and the test holding diagnosis output unchanged share it."""
    cluster = healthy_cluster(gpu_nodes, now, pods_per_node=pods_per_node)
    draw = random.Random(seed)
    alerts: list[Json] = []
    for item in cluster["items"]:
        if item["kind"] == "PodDisruptionBudget":
            item["status"]["disruptionsAllowed"] = 0
        if item["kind"] != "Node" or item["metadata"]["name"] == "cpu-1":
            continue
        roll = draw.random()
        fault = next((f for f, below in _FLEET_SHARES if roll < below), None)
        name = item["metadata"]["name"]
        if fault == "zero-capacity":
            item["status"]["allocatable"]["nvidia.com/gpu"] = "0"
        elif fault == "xid-alert":
            labels = {"alertname": "GPUXidError", "node": name, "gpu": "3", "xid": "48"}
            alerts.append(
                {
                    "status": "firing",
                    "labels": labels,
                    "annotations": {},
                    "startsAt": objects.ts(now - timedelta(minutes=10)),
                    "fingerprint": f"xid-{name}",
                }
            )
        elif fault == "cordoned":
            item["spec"]["unschedulable"] = True
            item["spec"]["taints"] = [
                {
                    "key": "node.kubernetes.io/unschedulable",
                    "effect": "NoSchedule",
                    "timeAdded": objects.ts(now - timedelta(hours=1)),
                }
            ]
        elif fault == "driver-drift":
            item["metadata"]["labels"]["nvidia.com/cuda.driver-version.full"] = "560.35.03"
        elif fault == "not-ready":
            for condition in item["status"]["conditions"]:
                if condition["type"] == "Ready":
                    condition["status"] = "Unknown"
                    condition["reason"] = "NodeStatusUnknown"
                    condition["message"] = "Kubelet stopped posting node status."
    payload = {
        "version": "4",
        "status": "firing",
        "receiver": "gpubot",
        "groupKey": "{}:{}",
        "alerts": alerts,
    }
    return cluster, payload


def owning_jobs(items: list[Json]) -> list[Json]:
    """The Job objects behind the pods of `items` whose controller is a Job not in `items`."""
    present = {
        (i["metadata"].get("namespace", ""), i["metadata"]["name"])
        for i in items
        if i.get("kind") == "Job"
    }
    pods: dict[tuple[str, str], list[Json]] = {}
    refs: dict[tuple[str, str], Json] = {}
    for item in items:
        if item.get("kind") != "Pod":
            continue
        for ref in item["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Job" and ref.get("controller"):
                key = (item["metadata"].get("namespace", "default"), str(ref["name"]))
                pods.setdefault(key, []).append(item)
                refs[key] = ref
    jobs: list[Json] = []
    for (namespace, name), owned in sorted(pods.items()):
        if (namespace, name) in present:
            continue
        oldest = min(str(p["metadata"].get("creationTimestamp", "")) for p in owned)
        uid = str(refs[(namespace, name)].get("uid", ""))
        template_spec = {
            k: v for k, v in owned[0].get("spec", {}).items() if k not in ("nodeName",)
        }
        labels = {
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "controller-uid": uid,
            "job-name": name,
        }
        count = len(owned)
        jobs.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "uid": uid,
                    "creationTimestamp": oldest,
                    "labels": dict(labels),
                },
                "spec": {
                    "backoffLimit": 6,
                    "completionMode": "NonIndexed",
                    "completions": count,
                    "parallelism": count,
                    "manualSelector": False,
                    "podReplacementPolicy": "TerminatingOrFailed",
                    "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
                    "suspend": False,
                    "template": {
                        "metadata": {"labels": dict(labels)},
                        "spec": template_spec,
                    },
                },
                "status": {"startTime": oldest, "active": count, "ready": count},
            }
        )
    return jobs


def main() -> None:
    """python -m gpusim.scenarios [GPU_NODES] > snapshot.json"""
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    json.dump(healthy_cluster(count), sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
