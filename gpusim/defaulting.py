"""What kube-apiserver fills in when a pod is created through the API.

A `POST .../pods` goes through three steps in the real server before it is stored, and this
module does them in the same order (sources from kubernetes/kubernetes):

1. Decoding runs the v1 defaulting functions, pkg/apis/core/v1/defaults.go:
   `SetDefaults_PodSpec` (dnsPolicy ClusterFirst, restartPolicy Always, securityContext {},
   terminationGracePeriodSeconds 30, schedulerName default-scheduler), `SetDefaults_Pod`
   (each container's limits stand in for missing requests, enableServiceLinks true),
   `SetDefaults_Container` (imagePullPolicy Always for an image tagged or defaulting to
   `latest`, else IfNotPresent, as pkg/util/parsers.ParseImageName reads the tag;
   terminationMessagePath /dev/termination-log, terminationMessagePolicy File), and the
   smaller ones a pod often meets: `SetDefaults_Probe` (timeout 1 s, period 10 s, success 1,
   failure 3), `SetDefaults_HTTPGetAction` (path /, scheme HTTP), a container port's protocol
   TCP, a fieldRef's apiVersion v1, `SetDefaults_Volume` (a volume naming no source is an
   emptyDir), a secret, configMap, downwardAPI or projected volume's defaultMode 0644 (420),
   a projected token's expirationSeconds 3600. The v1 conversion also prints the deprecated
   `serviceAccount` beside `serviceAccountName` (and reads it when only it is given).
2. The default mutating admission plugins: ServiceAccount (serviceAccountName `default`,
   plugin/pkg/admission/serviceaccount), DefaultTolerationSeconds (NoExecute tolerations of
   `node.kubernetes.io/not-ready` and `unreachable` for 300 s unless the pod tolerates them
   already, plugin/pkg/admission/defaulttolerationseconds), Priority (`priority` 0 and
   `preemptionPolicy` PreemptLowerPriority when no PriorityClass is named and none is the
   global default, plugin/pkg/admission/priority `getDefaultPriority`; the two system classes
   every cluster has resolve to their values).
3. The pod strategy's `PrepareForCreate`, pkg/registry/core/pod/strategy.go: whatever status
   the client sent is replaced by `{phase: Pending, qosClass: GetPodQOS(pod)}`
   (pkg/apis/core/helper/qos `ComputePodQOS`: only cpu and memory count), `generation` is 1,
   and a pod with scheduling gates gets `PodScheduled=False` (`SchedulingGated`). The
   registry's `BeforeCreate` then sets uid, creationTimestamp and a generated name, and the
   write its resourceVersion (`ClusterState.create`).

Left out, and why:
- the ServiceAccount plugin's token volume (`kube-api-access-XXXXX`, a projected volume of
  the token, `kube-root-ca.crt` and the namespace, mounted read-only at
  /var/run/secrets/kubernetes.io/serviceaccount in every container): the simulator's pods
  run nothing that would read it (its ServiceAccount tokens are written per account by
  `gpusim.credentials` for processes outside, such as `gpubot serve --in-cluster`), there is
  no kube-root-ca.crt ConfigMap, and nothing gpubot reads of a pod depends on it.
- the ServiceAccount and Priority plugins' lookups: with no ServiceAccount or PriorityClass
  kinds, a pod is never refused for naming one that does not exist (a class other than the
  two system ones leaves `priority` unset), and a pod that carries its own `priority` or
  `preemptionPolicy` keeps it (the real plugin computes both from the class and answers 403
  when the pod's own value differs): the scheduler tests set priorities that way.
- rarer v1 defaults: hostNetwork's hostPorts, iSCSI, RBD, Ceph and the other legacy volume
  sources' fields, ephemeral containers' probes.
- quantities written as strings are kept as written (the real server re-prints them in
  canonical form: "0.5" reads back as "500m", "1000" cpu as "1k"); numbers come back as the
  strings it would print (1 as "1", 0.5 as "500m").
- `metadata.managedFields` (server-side apply's field owners): kubectl hides it by default.
- LimitRanger, ResourceQuota, PodSecurity and admission webhooks: a default cluster has no
  LimitRange, quota or webhook, and PodSecurity only validates.
- defaults of the other kinds (a DaemonSet's updateStrategy and revisionHistoryLimit, a
  PDB's or ReplicaSet's generation, ...): only pods are created through the API in gpubot's
  flows.

Pure functions of the body they are given: they must never store, read the cluster, or
change the caller's object (they work on a copy).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from bot.kube_objects import quantity, spec_of
from gpusim.objects import DEFAULT_SCHEDULER, NOT_READY_TAINT, UNREACHABLE_TAINT, Json

DEFAULT_TOLERATION_SECONDS = 300
"""kube-apiserver's --default-not-ready-toleration-seconds and
--default-unreachable-toleration-seconds."""
TERMINATION_MESSAGE_PATH = "/dev/termination-log"
SCHEDULING_GATED = "Scheduling is blocked due to non-empty scheduling gates"
_QOS_RESOURCES = ("cpu", "memory")
_SYSTEM_PRIORITIES = {
    "system-cluster-critical": 2_000_000_000,
    "system-node-critical": 2_000_001_000,
}
"""The PriorityClasses kube-apiserver creates at start (pkg/apis/scheduling
SystemPriorityClasses)."""
_MODE_VOLUMES = ("secret", "configMap", "downwardAPI", "projected")
_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
_PROBE_DEFAULTS = {
    "timeoutSeconds": 1,
    "periodSeconds": 10,
    "successThreshold": 1,
    "failureThreshold": 3,
}


def pod_on_create(body: Mapping[str, Any]) -> Json:
    """The pod as kube-apiserver stores it, before the registry's uid, creationTimestamp and
    resourceVersion (the caller's `ClusterState.create` adds those)."""
    pod: Json = copy.deepcopy(dict(body))
    spec: Json = pod.setdefault("spec", {})
    _default_pod_spec(spec)
    _admit(spec)
    metadata: Json = pod.setdefault("metadata", {})
    metadata["generation"] = 1
    status: Json = {"phase": "Pending", "qosClass": pod_qos(pod)}
    if spec.get("schedulingGates"):
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "lastProbeTime": None,
                "lastTransitionTime": None,
                "reason": "SchedulingGated",
                "message": SCHEDULING_GATED,
            }
        ]
    pod["status"] = status
    return pod


def _default_pod_spec(spec: Json) -> None:
    """SetDefaults_PodSpec, SetDefaults_Pod and SetDefaults_Container."""
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("securityContext", {})
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("schedulerName", DEFAULT_SCHEDULER)
    spec.setdefault("enableServiceLinks", True)
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for container in spec.get(key) or []:
            if not isinstance(container, dict):
                continue
            container.setdefault("imagePullPolicy", pull_policy(str(container.get("image", ""))))
            container.setdefault("terminationMessagePath", TERMINATION_MESSAGE_PATH)
            container.setdefault("terminationMessagePolicy", "File")
            # A struct, not a pointer, in the Go types: printed even when empty.
            container.setdefault("resources", {})
            _quantities_as_text(container["resources"])
            for port in container.get("ports") or []:
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")
            for variable in container.get("env") or []:
                _default_field_ref(((variable or {}).get("valueFrom") or {}).get("fieldRef"))
            if key != "ephemeralContainers":
                _requests_from_limits(container)
                for probe in _PROBES:
                    _default_probe(container.get(probe))
    for volume in spec.get("volumes") or []:
        if isinstance(volume, dict):
            _default_volume(volume)


def _default_probe(probe: Any) -> None:
    if not isinstance(probe, dict):
        return
    for key, value in _PROBE_DEFAULTS.items():
        probe.setdefault(key, value)
    if isinstance(probe.get("httpGet"), dict):
        probe["httpGet"].setdefault("path", "/")
        probe["httpGet"].setdefault("scheme", "HTTP")


def _default_field_ref(ref: Any) -> None:
    if isinstance(ref, dict):
        ref.setdefault("apiVersion", "v1")


def _default_volume(volume: Json) -> None:
    if not set(volume) - {"name"}:
        volume["emptyDir"] = {}
    for kind in _MODE_VOLUMES:
        if isinstance(volume.get(kind), dict):
            volume[kind].setdefault("defaultMode", 420)
    if isinstance(volume.get("hostPath"), dict):
        volume["hostPath"].setdefault("type", "")
    for item in (volume.get("downwardAPI") or {}).get("items") or []:
        _default_field_ref((item or {}).get("fieldRef"))
    for source in (volume.get("projected") or {}).get("sources") or []:
        if not isinstance(source, dict):
            continue
        if isinstance(source.get("serviceAccountToken"), dict):
            source["serviceAccountToken"].setdefault("expirationSeconds", 3600)
        for item in (source.get("downwardAPI") or {}).get("items") or []:
            _default_field_ref((item or {}).get("fieldRef"))


def _quantities_as_text(resources: Any) -> None:
    """A quantity sent as a JSON number comes back as the string resource.Quantity prints."""
    if not isinstance(resources, dict):
        return
    for part in ("limits", "requests"):
        amounts = resources.get(part)
        if isinstance(amounts, dict):
            for name, value in amounts.items():
                amounts[name] = quantity_text(value)


def quantity_text(value: Any) -> Any:
    """A number as resource.Quantity's String() prints it ("1", "500m"); anything else as is."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    amount = Decimal(str(value))
    if amount == amount.to_integral_value():
        return str(int(amount))
    milli = amount * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return str(amount)


def _requests_from_limits(container: Json) -> None:
    resources = container.get("resources")
    if not isinstance(resources, dict) or not isinstance(resources.get("limits"), dict):
        return
    requests = resources.setdefault("requests", {})
    for name, value in resources["limits"].items():
        requests.setdefault(name, value)


def _admit(spec: Json) -> None:
    """The ServiceAccount, DefaultTolerationSeconds and Priority admission plugins."""
    spec["serviceAccountName"] = (
        spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    )
    spec["serviceAccount"] = spec["serviceAccountName"]  # v1's deprecated copy
    tolerations = [t for t in spec.get("tolerations") or [] if isinstance(t, dict)]
    for key in (NOT_READY_TAINT, UNREACHABLE_TAINT):
        if not _tolerates_no_execute(tolerations, key):
            tolerations.append(
                {
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
                }
            )
    spec["tolerations"] = tolerations
    named = spec.get("priorityClassName")
    if not named or named in _SYSTEM_PRIORITIES:
        spec.setdefault("priority", _SYSTEM_PRIORITIES.get(str(named), 0))
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")


def _tolerates_no_execute(tolerations: Iterable[Mapping[str, Any]], key: str) -> bool:
    """DefaultTolerationSeconds' test: a toleration of this key (or of every key) whose effect
    is NoExecute (or every effect)."""
    return any(
        (t.get("key") in (key, "", None)) and (t.get("effect") in ("NoExecute", "", None))
        for t in tolerations
    )


def pull_policy(image: str) -> str:
    """SetDefaults_Container: Always when the image's tag is `latest` (also when it names
    neither tag nor digest), IfNotPresent otherwise."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.partition(":")[2] if ":" in last else ""
    if not tag and not digest:
        tag = "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def pod_qos(pod: Mapping[str, Any]) -> str:
    """ComputePodQOS (pkg/apis/core/helper/qos): BestEffort when no container requests or
    limits cpu or memory, Guaranteed when every container limits both and requests equal
    limits, Burstable otherwise. Other resources (`nvidia.com/gpu`) do not count."""
    spec = spec_of(pod)
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    for container in containers:
        resources = container.get("resources") or {}
        for name, value in (resources.get("requests") or {}).items():
            amount = _amount(name, value)
            if name in _QOS_RESOURCES and amount > 0:
                requests[name] = requests.get(name, Decimal(0)) + amount
        found = set()
        for name, value in (resources.get("limits") or {}).items():
            amount = _amount(name, value)
            if name in _QOS_RESOURCES and amount > 0:
                found.add(name)
                limits[name] = limits.get(name, Decimal(0)) + amount
        if not found >= set(_QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    equal = all(limits.get(name) == amount for name, amount in requests.items())
    return "Guaranteed" if guaranteed and equal and len(requests) == len(limits) else "Burstable"


def _amount(name: str, value: Any) -> Decimal:
    return Decimal(quantity(value, milli=True))
