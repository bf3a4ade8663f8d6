"""Kubernetes objects as the API server returns them for a GPU cluster run by the GPU Operator.

Field for field what `kubectl get -o json` prints for nodes, pods, events, PDBs and
DaemonSets (names, labels and statuses from NVIDIA/gpu-operator and k8s-device-plugin), so
that the snapshot parser, the rule tests and later the simulated API server all stand on the
same ground. Names and uids are derived from the inputs: the same call gives the same object.
Builders only: they must never read or write a cluster, and their output must stay what
`rules/tests/snapshots/healthy.json` holds (a test compares them).
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

Json = dict[str, Any]

GPU_OPERATOR_NS = "gpu-operator"
OPERATOR_DAEMONSETS = (
    ("nvidia-driver-daemonset", "driver"),
    ("nvidia-container-toolkit-daemonset", "container-toolkit"),
    ("nvidia-device-plugin-daemonset", "device-plugin"),
    ("gpu-feature-discovery", "gpu-feature-discovery"),
    ("nvidia-dcgm-exporter", "dcgm-exporter"),
    ("nvidia-mig-manager", "mig-manager"),
    ("nvidia-operator-validator", "operator-validator"),
)
DRIVER_VERSION = "550.54.15"
DRIVER_APP = "nvidia-driver-daemonset"
DEVICE_PLUGIN_APP = "nvidia-device-plugin-daemonset"
DCGM_EXPORTER_APP = "nvidia-dcgm-exporter"
GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_SCHEDULER = "default-scheduler"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
KUBELET_CONDITIONS = {
    "MemoryPressure": (
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    "DiskPressure": ("False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    "PIDPressure": ("False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    "Ready": ("True", "KubeletReady", "kubelet is posting ready status"),
}
"""The node conditions a healthy kubelet posts, in its order: type -> (status, reason, message)."""


NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""The characters apiserver's names.SimpleNameGenerator draws from: no vowels, so no words."""


def digest(*parts: str, length: int = 5) -> str:
    raw = hashlib.sha256("/".join(parts).encode()).digest()
    return "".join(NAME_ALPHABET[b % len(NAME_ALPHABET)] for b in raw[:length])


def uid(*parts: str) -> str:
    h = hashlib.sha256("/".join(parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def gpu_node_labels(
    name: str,
    pool: str,
    gpus: int = 8,
    driver: str = DRIVER_VERSION,
    product: str = "NVIDIA-A100-SXM4-80GB",
) -> dict[str, str]:
    major, minor, rev = [*driver.split("."), "", "", ""][:3]
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "p4d.24xlarge",
        "topology.kubernetes.io/region": "us-east-1",
        "topology.kubernetes.io/zone": "us-east-1a",
        "eks.amazonaws.com/nodegroup": pool,
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "nvidia.com/cuda.driver-version.full": driver,
        "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": rev,
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": rev,
        "nvidia.com/cuda.runtime-version.full": "12.4",
        "nvidia.com/gfd.timestamp": "1764644400",
        "nvidia.com/gpu-driver-upgrade-state": "upgrade-done",
        "nvidia.com/gpu.compute.major": "8",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.family": "ampere",
        "nvidia.com/gpu.machine": "p4d.24xlarge",
        "nvidia.com/gpu.memory": "81920",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/mig.config": "all-disabled",
        "nvidia.com/mig.config.state": "success",
    }
    for _, deploy in OPERATOR_DAEMONSETS:
        labels[f"nvidia.com/gpu.deploy.{deploy}"] = "true"
    labels["nvidia.com/gpu.deploy.dcgm"] = "true"
    return labels


def node(
    name: str,
    pool: str,
    now: datetime,
    *,
    gpus: int = 8,
    age: timedelta = timedelta(days=30),
    driver: str = DRIVER_VERSION,
    gpu: bool = True,
) -> Json:
    created = now - age
    boot = now - age + timedelta(minutes=3)
    labels = (
        gpu_node_labels(name, pool, gpus, driver)
        if gpu
        else {
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": "m6i.4xlarge",
            "eks.amazonaws.com/nodegroup": pool,
        }
    )
    capacity = {
        "cpu": "96" if gpu else "16",
        "ephemeral-storage": "7812500Mi" if gpu else "104845292Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": "1176371860Ki" if gpu else "65023700Ki",
        "pods": "110",
    }
    allocatable = {
        **capacity,
        "cpu": "95690m" if gpu else "15890m",
        "memory": "1175356052Ki" if gpu else "64007892Ki",
    }
    if gpu:
        capacity["nvidia.com/gpu"] = str(gpus)
        allocatable["nvidia.com/gpu"] = str(gpus)
    ready_since = ts(boot + timedelta(minutes=1))

    def condition(kind: str, status: str, reason: str, message: str) -> Json:
        return {
            "type": kind,
            "status": status,
            "lastHeartbeatTime": ts(now - timedelta(seconds=25)),
            "lastTransitionTime": ready_since,
            "reason": reason,
            "message": message,
        }

    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": uid("node", name),
            "resourceVersion": str(100000 + int(digest(name, length=3).encode().hex(), 16) % 90000),
            "creationTimestamp": ts(created),
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {
            "providerID": f"aws:///us-east-1a/i-0{digest(name, length=16)}",
            "podCIDR": "10.244.0.0/24",
        },
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [
                condition(kind, *healthy) for kind, healthy in KUBELET_CONDITIONS.items()
            ],
            "addresses": [
                {
                    "type": "InternalIP",
                    "address": node_ip(name),
                },
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": digest(name, "machine", length=32),
                "systemUUID": uid("system", name),
                "bootID": uid("boot", name, ts(boot)),
                "kernelVersion": "5.15.0-1061-aws",
                "osImage": "Ubuntu 22.04.4 LTS",
                "containerRuntimeVersion": "containerd://1.7.13",
                "kubeletVersion": "v1.30.4",
                "kubeProxyVersion": "v1.30.4",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def running_conditions(since: datetime) -> list[Json]:
    """The conditions of a pod the kubelet has started and that is Ready."""
    return [
        {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": ts(since)}
        for kind in (
            "PodReadyToStartContainers",
            "Initialized",
            "Ready",
            "ContainersReady",
            "PodScheduled",
        )
    ]


def owner(kind: str, name: str, api_version: str = "apps/v1") -> Json:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid(kind, name),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def node_ip(node_name: str) -> str:
    digest = hashlib.sha256(node_name.encode()).digest()
    return f"10.0.{digest[0]}.{digest[1] % 250 + 2}"


def _pod_ip(namespace: str, name: str) -> str:
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).digest()
    return f"10.{digest[0] % 64 + 128}.{digest[1]}.{digest[2] % 250 + 2}"


def _container_status(
    name: str, image: str, started: datetime, restarts: int = 0, pod: str = ""
) -> Json:
    return {
        "name": name,
        "image": image,
        "imageID": f"{image.split(':')[0]}@sha256:{hashlib.sha256(image.encode()).hexdigest()}",
        "containerID": "containerd://"
        + hashlib.sha256(f"{pod}/{name}/{ts(started)}".encode()).hexdigest(),
        "ready": True,
        "started": True,
        "restartCount": restarts,
        "state": {"running": {"startedAt": ts(started)}},
        "lastState": {},
    }


def pod(
    name: str,
    namespace: str,
    node_name: str | None,
    now: datetime,
    *,
    labels: dict[str, str] | None = None,
    owner_ref: Json | None = None,
    image: str = "busybox:1.36",
    gpus: int = 0,
    age: timedelta = timedelta(days=2),
    emptydir: bool = False,
    grace: int = 30,
    tolerations: list[Json] | None = None,
    generate_name: str | None = None,
    init_containers: list[str] | None = None,
    restart_policy: str = "Always",
    host_ip: str = "10.0.1.10",
) -> Json:
    created = now - age
    container: Json = {
        "name": "main",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    if gpus:
        container["resources"] = {
            "limits": {"nvidia.com/gpu": str(gpus)},
            "requests": {"nvidia.com/gpu": str(gpus)},
        }
    volumes: list[Json] = [
        {
            "name": f"kube-api-access-{digest(name, 'vol')}",
            "projected": {
                "defaultMode": 420,
                "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}],
            },
        }
    ]
    if emptydir:
        volumes.append({"name": "scratch", "emptyDir": {}})
        container["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    metadata: Json = {
        "name": name,
        "namespace": namespace,
        "uid": uid("pod", namespace, name),
        "resourceVersion": str(200000 + len(name)),
        "creationTimestamp": ts(created),
        "labels": labels or {},
    }
    if owner_ref:
        metadata["ownerReferences"] = [owner_ref]
    if generate_name:
        metadata["generateName"] = generate_name
    spec: Json = {
        "containers": [container],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "restartPolicy": restart_policy,
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": grace,
        "tolerations": tolerations
        or [
            {
                "effect": "NoExecute",
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "tolerationSeconds": 300,
            },
            {
                "effect": "NoExecute",
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "tolerationSeconds": 300,
            },
        ],
        "volumes": volumes,
    }
    status: Json
    if node_name:
        spec["nodeName"] = node_name
        started = created + timedelta(seconds=20)
        status = {
            "phase": "Running",
            "conditions": running_conditions(started),
            "hostIP": host_ip,
            "podIP": _pod_ip(namespace, name),
            "startTime": ts(created + timedelta(seconds=2)),
            "containerStatuses": [
                _container_status("main", image, started, pod=f"{namespace}/{name}")
            ],
            "qosClass": "BestEffort" if not gpus else "Burstable",
        }
        if init_containers:
            spec["initContainers"] = [{"name": n, "image": image} for n in init_containers]
            status["initContainerStatuses"] = [
                {
                    "name": n,
                    "image": image,
                    "imageID": "",
                    "ready": True,
                    "restartCount": 0,
                    "state": {
                        "terminated": {
                            "exitCode": 0,
                            "reason": "Completed",
                            "startedAt": ts(created),
                            "finishedAt": ts(started),
                        }
                    },
                    "lastState": {},
                }
                for n in init_containers
            ]
    else:
        status = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "lastProbeTime": None,
                    "lastTransitionTime": ts(created),
                    "reason": "Unschedulable",
                    "message": "0/5 nodes are available",
                }
            ],
            "qosClass": "Burstable" if gpus else "BestEffort",
        }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


_DS_TOLERATIONS = [
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists"},
    {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists"},
    {"effect": "NoSchedule", "key": "node.kubernetes.io/disk-pressure", "operator": "Exists"},
    {"effect": "NoSchedule", "key": "node.kubernetes.io/memory-pressure", "operator": "Exists"},
    {"effect": "NoSchedule", "key": "node.kubernetes.io/pid-pressure", "operator": "Exists"},
    {"effect": "NoSchedule", "key": "node.kubernetes.io/unschedulable", "operator": "Exists"},
]


def operator_pods(node_name: str, now: datetime, age: timedelta = timedelta(days=30)) -> list[Json]:
    pods = []
    for ds, _ in OPERATOR_DAEMONSETS:
        pods.append(
            pod(
                f"{ds}-{digest(ds, node_name)}",
                GPU_OPERATOR_NS,
                node_name,
                now,
                labels={
                    "app": ds,
                    "controller-revision-hash": digest(ds, length=10),
                    "pod-template-generation": "1",
                },
                owner_ref=owner("DaemonSet", ds),
                image=f"nvcr.io/nvidia/{ds}:v24.3.0",
                age=age - timedelta(minutes=2),
                tolerations=_DS_TOLERATIONS,
                host_ip=node_ip(node_name),
                generate_name=f"{ds}-",
                init_containers=(
                    [
                        "driver-validation",
                        "toolkit-validation",
                        "cuda-validation",
                        "plugin-validation",
                    ]
                    if ds == "nvidia-operator-validator"
                    else None
                ),
            )
        )
    return pods


def daemonset(name: str, namespace: str, nodes: int, selector_label: str | None) -> Json:
    node_selector = {selector_label: "true"} if selector_label else {}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid("DaemonSet", name),
            "generation": 1,
            "labels": {"app": name},
        },
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"nodeSelector": node_selector, "tolerations": _DS_TOLERATIONS},
            },
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
            },
        },
        "status": {
            "currentNumberScheduled": nodes,
            "desiredNumberScheduled": nodes,
            "numberAvailable": nodes,
            "numberMisscheduled": 0,
            "numberReady": nodes,
            "observedGeneration": 1,
            "updatedNumberScheduled": nodes,
        },
    }


def pdb(
    name: str, namespace: str, match_labels: dict[str, str], min_available: int, healthy: int
) -> Json:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid("pdb", namespace, name),
            "generation": 1,
        },
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": match_labels}},
        "status": {
            "currentHealthy": healthy,
            "desiredHealthy": min_available,
            "disruptionsAllowed": max(0, healthy - min_available),
            "expectedPods": healthy,
            "observedGeneration": 1,
            "conditions": [
                {
                    "type": "DisruptionAllowed",
                    "status": "True" if healthy > min_available else "False",
                    "reason": "SufficientPods" if healthy > min_available else "InsufficientPods",
                    "message": "",
                    "lastTransitionTime": "2026-11-01T00:00:00Z",
                    "observedGeneration": 1,
                }
            ],
        },
    }


def event(
    involved_kind: str,
    involved_name: str,
    namespace: str,
    reason: str,
    message: str,
    at: datetime,
    *,
    component: str = "kubelet",
    host: str | None = None,
    type_: str = "Normal",
    count: int = 1,
) -> Json:
    name = f"{involved_name}.{digest(reason, involved_name, ts(at), length=16)}"
    source: Json = {"component": component}
    if host:
        source["host"] = host
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": name,
            "namespace": namespace or "default",
            "uid": uid("event", name),
            "creationTimestamp": ts(at),
        },
        "involvedObject": {
            "kind": involved_kind,
            "name": involved_name,
            **({"namespace": namespace} if namespace else {}),
            "uid": uid(involved_kind, involved_name),
            "apiVersion": "v1",
        },
        "reason": reason,
        "message": message,
        "source": source,
        "firstTimestamp": ts(at),
        "lastTimestamp": ts(at),
        "count": count,
        "type": type_,
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": host or "",
    }
