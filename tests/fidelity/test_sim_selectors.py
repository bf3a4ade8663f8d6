"""Selectors as the API server parses and applies them (gpusim/*_selectors.py).

Error texts are the server's own: a simulated server must answer a bad selector with the
message kubectl prints after "Error from server (BadRequest): ...".
"""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest

from gpusim import objects
from gpusim.field_selectors import parse_field_selector, selectable_fields
from gpusim.label_selectors import LabelOperator, SelectorError, parse_label_selector
from gpusim.scenarios import FIXTURE_NOW, healthy_cluster

NOW = FIXTURE_NOW
KEY_REGEX = "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'"
KEY_RULE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    f"alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    f"validation is {KEY_REGEX})"
)
VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def _items(kind: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = healthy_cluster()["items"]
    return [item for item in items if item["kind"] == kind]


def _names(selected: list[dict[str, Any]]) -> list[str]:
    return sorted(item["metadata"]["name"] for item in selected)


# ---------------------------------------------------------------------------- label selectors


GPU_LABELS = objects.gpu_node_labels("gpu-a1", "a100-east")
CPU_LABELS = {"kubernetes.io/hostname": "cpu-1", "eks.amazonaws.com/nodegroup": "system"}


@pytest.mark.parametrize("text", ["", "   ", "\t\n"])
def test_empty_label_selector_selects_everything(text: str) -> None:
    selector = parse_label_selector(text)
    assert selector.empty
    assert selector.matches({}) and selector.matches(GPU_LABELS)
    assert str(selector) == ""


@pytest.mark.parametrize(
    ("text", "gpu", "cpu"),
    [
        ("nvidia.com/gpu.present=true", True, False),
        ("nvidia.com/gpu.present==true", True, False),
        ("nvidia.com/gpu.present!=true", False, True),  # != also selects a missing key
        ("nvidia.com/gpu.product in (NVIDIA-A100-SXM4-80GB,NVIDIA-H100-80GB-HBM3)", True, False),
        ("nvidia.com/gpu.product notin (NVIDIA-A100-SXM4-80GB)", False, True),
        ("nvidia.com/gpu.product notin (NVIDIA-H100-80GB-HBM3)", True, True),
        ("nvidia.com/gpu.present", True, False),
        ("!nvidia.com/gpu.present", False, True),
        ("nvidia.com/gpu.count>4", True, False),
        ("nvidia.com/gpu.count<8", False, False),  # no count on the CPU node: no match
        ("nvidia.com/gpu.count>8", False, False),
        ("nvidia.com/gpu.memory>40000,nvidia.com/gpu.count<16", True, False),
        ("nvidia.com/gpu.family>1", False, False),  # "ampere" is no integer: no match
        ("eks.amazonaws.com/nodegroup in (a100-east,system),!nvidia.com/mig.capable", False, True),
        ("kubernetes.io/hostname", True, True),
        ("nvidia.com/gpu.present=true,nvidia.com/mig.config notin (all-1g.10gb)", True, False),
    ],
)
def test_label_selector_on_gpu_and_cpu_nodes(text: str, gpu: bool, cpu: bool) -> None:
    selector = parse_label_selector(text)
    assert selector.matches(GPU_LABELS) is gpu
    assert selector.matches(CPU_LABELS) is cpu


def test_label_selector_over_a_cluster() -> None:
    pods = _items("Pod")
    selector = parse_label_selector("app in (nvidia-driver-daemonset, nvidia-dcgm-exporter)")
    picked = [p for p in pods if selector.matches(p["metadata"]["labels"])]
    assert len(picked) == 8  # two DaemonSets on four GPU nodes
    jobs = parse_label_selector("job-name,training.kubeflow.org/replica-index=0")
    assert _names([p for p in pods if jobs.matches(p["metadata"]["labels"])]) == [
        "train-llm-0-worker-0",
        "train-llm-1-worker-0",
    ]


def test_whitespace_is_allowed_between_tokens() -> None:
    selector = parse_label_selector("  app = nginx ,\ttier in ( web , api ) ,\n!canary ")
    assert str(selector) == "app=nginx,!canary,tier in (api,web)"  # sorted by key
    assert selector.matches({"app": "nginx", "tier": "api"})
    assert not selector.matches({"app": "nginx", "tier": "api", "canary": "true"})


def test_requirements_are_sorted_by_key_and_values_deduplicated() -> None:
    selector = parse_label_selector("zone notin (b,a,b),app=x,gpu>2")
    assert [r.key for r in selector.requirements] == ["app", "gpu", "zone"]
    assert [r.operator for r in selector.requirements] == [
        LabelOperator.EQUALS,
        LabelOperator.GREATER_THAN,
        LabelOperator.NOT_IN,
    ]
    assert selector.requirements[2].values == ("a", "b")
    assert str(selector) == "app=x,gpu>2,zone notin (a,b)"


def test_in_and_notin_are_keywords_only_where_an_operator_stands() -> None:
    assert parse_label_selector("in=notin").matches({"in": "notin"})
    selector = parse_label_selector("mode in (in,notin)")
    assert selector.matches({"mode": "in"}) and selector.matches({"mode": "notin"})


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("a=", ("",)),
        ("a==,b", ("",)),
        ("a in ()", ("",)),
        ("a in (,)", ("",)),
        ("a in (x,,y)", ("", "x", "y")),
        ("a in (x,)", ("", "x")),
    ],
)
def test_empty_values(text: str, values: tuple[str, ...]) -> None:
    assert parse_label_selector(text).requirements[0].values == values


def test_empty_value_matches_empty_label_only() -> None:
    selector = parse_label_selector("a=")
    assert selector.matches({"a": ""})
    assert not selector.matches({}) and not selector.matches({"a": "x"})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a in (x", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("a in (x y)", "unable to parse requirement: found 'y', expected: ',' or ')'"),
        ("a in x", "unable to parse requirement: found 'x' expected: '('"),
        ("a in (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
        (
            "a b",
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
        ),
        ("a=(", "unable to parse requirement: found '(', expected: identifier"),
        ("!", "unable to parse requirement: found '', expected: identifier"),
        ("a=b,", "found '', expected: identifier after ','"),
        (",a", "found ',', expected: !, identifier, or 'end of string'"),
        ("(", "found '(', expected: !, identifier, or 'end of string'"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        (
            "app:monolith",
            f'unable to parse requirement: <nil>: Invalid value: "app:monolith": name part '
            f"{KEY_RULE}",
        ),
        (
            "*bar",
            f'unable to parse requirement: <nil>: Invalid value: "*bar": name part {KEY_RULE}',
        ),
        (
            "app.kubernetes_io/name=vault",
            'unable to parse requirement: <nil>: Invalid value: "app.kubernetes_io/name": '
            "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an alphanumeric character "
            "(e.g. 'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
        (
            "/a",
            'unable to parse requirement: <nil>: Invalid value: "/a": prefix part must be '
            "non-empty",
        ),
        (
            "a/",
            'unable to parse requirement: <nil>: Invalid value: "a/": name part must be '
            f"non-empty; name part {KEY_RULE}",
        ),
        (
            "a/b/c ?=? def",
            'unable to parse requirement: <nil>: Invalid value: "a/b/c": a valid label key '
            f"{KEY_RULE} with an optional DNS subdomain prefix and '/' (e.g. "
            "'example.com/MyName')",
        ),
        (
            "k" * 64,
            f'unable to parse requirement: <nil>: Invalid value: "{"k" * 64}": name part must '
            "be no more than 63 bytes",
        ),
        (
            "nvidia.com/gpu.count>many",
            "unable to parse requirement: values[0]: Invalid value: \"many\": for 'Gt', 'Lt' "
            "operators, the value must be an integer",
        ),
        (
            "nvidia.com/gpu.count<-1",
            'unable to parse requirement: values[0][nvidia.com/gpu.count]: Invalid value: "-1": '
            f"{VALUE_RULE}",
        ),
        (
            "app=-x",
            f'unable to parse requirement: values[0][app]: Invalid value: "-x": {VALUE_RULE}',
        ),
        (
            "tier in (web,-x,_y)",
            "unable to parse requirement: ["
            f'values[0][tier]: Invalid value: "-x": {VALUE_RULE}, '
            f'values[1][tier]: Invalid value: "_y": {VALUE_RULE}]',
        ),
        (
            "a=" + "v" * 64,
            f'unable to parse requirement: values[0][a]: Invalid value: "{"v" * 64}": must be '
            "no more than 63 bytes",
        ),
    ],
)
def test_label_selector_errors(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        parse_label_selector(text)
    assert str(caught.value) == message


def test_selector_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unable to parse requirement"):
        parse_label_selector("a in")


# ---------------------------------------------------------------------------- field selectors


def test_kubectl_drain_selects_the_pods_of_one_node() -> None:
    pods = _items("Pod")
    selector = parse_field_selector("spec.nodeName=gpu-a1", "pods")
    picked = [p for p in pods if selector.matches(p)]
    assert len(picked) == len(objects.OPERATOR_DAEMONSETS) + 2
    assert all(p["spec"]["nodeName"] == "gpu-a1" for p in picked)
    assert "train-llm-0-worker-0" in _names(picked)


def test_kubectl_style_escaped_value_round_trips() -> None:
    # kubectl builds the drain selector with fields.SelectorFromSet, which escapes the value.
    selector = parse_field_selector("spec.nodeName=gpu-a1", "pods")
    assert str(selector) == "spec.nodeName=gpu-a1"
    assert str(parse_field_selector(str(selector), "pods")) == str(selector)


def _pod(name: str, node: str | None, phase: str | None = None) -> dict[str, Any]:
    pod = objects.pod(name, "ml", node, NOW, age=timedelta(hours=1))
    if phase:
        pod["status"]["phase"] = phase
    return pod


def test_phase_not_succeeded_and_not_failed() -> None:
    selector = parse_field_selector("status.phase!=Succeeded,status.phase!=Failed", "pods")
    pods = [
        _pod("running", "gpu-a1"),
        _pod("pending", None),
        _pod("done", "gpu-a1", "Succeeded"),
        _pod("crashed", "gpu-a1", "Failed"),
    ]
    assert _names([p for p in pods if selector.matches(p)]) == ["pending", "running"]
    assert str(selector) == "status.phase!=Failed,status.phase!=Succeeded"


def test_drain_combined_with_phase() -> None:
    selector = parse_field_selector(
        "spec.nodeName=gpu-a1,status.phase!=Succeeded,status.phase!=Failed", "pods"
    )
    pods = [_pod("a", "gpu-a1"), _pod("b", "gpu-a2"), _pod("c", "gpu-a1", "Succeeded")]
    assert _names([p for p in pods if selector.matches(p)]) == ["a"]


def test_missing_field_reads_as_empty() -> None:
    unscheduled = parse_field_selector("spec.nodeName=", "pods")
    assert unscheduled.matches(_pod("pending", None))
    assert not unscheduled.matches(_pod("running", "gpu-a1"))
    assert parse_field_selector("status.nominatedNodeName=", "pods").matches(_pod("x", "n"))


def test_booleans_compare_as_true_and_false() -> None:
    pod = _pod("x", "gpu-a1")
    assert "hostNetwork" not in pod["spec"]
    # Go's zero value: a pod without hostNetwork is hostNetwork=false, not "".
    assert parse_field_selector("spec.hostNetwork=false", "pods").matches(pod)
    assert not parse_field_selector("spec.hostNetwork=", "pods").matches(pod)
    pod["spec"]["hostNetwork"] = True
    assert parse_field_selector("spec.hostNetwork=true", "pods").matches(pod)

    node = objects.node("gpu-a1", "a100-east", NOW)
    schedulable = parse_field_selector("spec.unschedulable=false", "nodes")
    assert schedulable.matches(node)
    cordoned = copy.deepcopy(node)
    cordoned["spec"]["unschedulable"] = True
    assert not schedulable.matches(cordoned)
    assert parse_field_selector("spec.unschedulable==true", "nodes").matches(cordoned)


def test_node_by_name() -> None:
    nodes = _items("Node")
    selector = parse_field_selector("metadata.name=gpu-a3", "nodes")
    assert _names([n for n in nodes if selector.matches(n)]) == ["gpu-a3"]


def test_pod_fields() -> None:
    pod = objects.pod(
        "w", "ml", "gpu-a1", NOW, restart_policy="OnFailure", host_ip=objects.node_ip("gpu-a1")
    )
    fields = selectable_fields(pod, "pods")
    assert fields == {
        "metadata.name": "w",
        "metadata.namespace": "ml",
        "spec.nodeName": "gpu-a1",
        "spec.restartPolicy": "OnFailure",
        "spec.schedulerName": "default-scheduler",
        "spec.serviceAccountName": "default",
        "spec.hostNetwork": "false",
        "status.phase": "Running",
        "status.podIP": pod["status"]["podIP"],
        "status.nominatedNodeName": "",
    }
    # podIPs alone (podIP left out) still gives the primary IP.
    del pod["status"]["podIP"]
    pod["status"]["podIPs"] = [{"ip": "10.244.3.7"}, {"ip": "fd00::7"}]
    assert parse_field_selector("status.podIP=10.244.3.7", "pods").matches(pod)
    # status.podIPs is accepted but never in the field set.
    assert parse_field_selector("status.podIPs=", "pods").matches(pod)


def test_metadata_namespace() -> None:
    pods = _items("Pod")
    selector = parse_field_selector("metadata.namespace!=gpu-operator", "pods")
    assert {p["metadata"]["namespace"] for p in pods if selector.matches(p)} == {
        "ml",
        "monitoring",
    }


def test_spec_host_is_converted_to_spec_node_name() -> None:
    selector = parse_field_selector("spec.host=gpu-a2", "pods")
    assert str(selector) == "spec.nodeName=gpu-a2"
    assert selector.matches(_pod("x", "gpu-a2"))


def _node_events() -> list[dict[str, Any]]:
    return [
        objects.event(
            "Node",
            "gpu-a1",
            "",
            "NodeNotReady",
            "Node gpu-a1 status is now: NodeNotReady",
            NOW,
            component="node-controller",
        ),
        objects.event("Node", "gpu-a1", "", "NodeHasSufficientMemory", "ok", NOW, host="gpu-a1"),
        objects.event("Node", "gpu-a2", "", "NodeNotReady", "x", NOW, component="node-controller"),
        objects.event("Pod", "gpu-a1", "ml", "Scheduled", "x", NOW, component="default-scheduler"),
    ]


def test_events_of_one_node() -> None:
    selector = parse_field_selector("involvedObject.kind=Node,involvedObject.name=gpu-a1", "events")
    picked = [e for e in _node_events() if selector.matches(e)]
    assert sorted(e["reason"] for e in picked) == ["NodeHasSufficientMemory", "NodeNotReady"]


def test_event_fields() -> None:
    event = objects.event(
        "Pod",
        "w",
        "ml",
        "FailedScheduling",
        "0/5 nodes",
        NOW,
        component="default-scheduler",
        type_="Warning",
    )
    fields = selectable_fields(event, "events")
    assert fields["involvedObject.namespace"] == "ml"
    assert fields["involvedObject.uid"] == event["involvedObject"]["uid"]
    assert fields["involvedObject.fieldPath"] == ""
    assert fields["source"] == fields["reportingComponent"] == "default-scheduler"
    assert fields["metadata.namespace"] == "ml"
    warnings = parse_field_selector("type=Warning,reason=FailedScheduling", "events")
    assert warnings.matches(event)
    # An events.k8s.io-style event without source.component: source falls back to it.
    event["source"] = {}
    event["reportingComponent"] = "karpenter"
    assert parse_field_selector("source=karpenter", "events").matches(event)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (r"metadata.name=a\,b", "a,b"),
        (r"metadata.name=a\=b", "a=b"),
        (r"metadata.name=a\\b", "a\\b"),
        (r"metadata.name==a\\\,b", "a\\,b"),
        ("metadata.name=", ""),
    ],
)
def test_escaped_values(text: str, value: str) -> None:
    selector = parse_field_selector(text, "configmaps")
    (requirement,) = selector.requirements
    assert requirement.value == value
    assert selector.matches({"metadata": {"name": value, "namespace": "x"}})
    assert parse_field_selector(str(selector), "configmaps") == selector


@pytest.mark.parametrize("text", ["", ",", ",,"])
def test_empty_field_selector_selects_everything(text: str) -> None:
    selector = parse_field_selector(text, "pods")
    assert selector.empty and selector.matches({}) and str(selector) == ""


def test_other_resources_take_metadata_name_and_namespace() -> None:
    cm = {"kind": "ConfigMap", "metadata": {"name": "gpu-config", "namespace": "gpu-operator"}}
    selector = parse_field_selector(
        "metadata.name=gpu-config,metadata.namespace=gpu-operator", "configmaps"
    )
    assert selector.matches(cm)
    # A cluster-scoped object has no namespace: "" as on the server.
    node = objects.node("gpu-a1", "a100-east", NOW)
    assert parse_field_selector("metadata.namespace=", "clusterroles").matches(node)


def test_more_core_kinds() -> None:
    assert parse_field_selector("status.phase=Active", "namespaces").matches(
        {"metadata": {"name": "ml"}, "status": {"phase": "Active"}}
    )
    assert parse_field_selector("type=kubernetes.io/tls", "secrets").matches(
        {"metadata": {"name": "s", "namespace": "ml"}, "type": "kubernetes.io/tls"}
    )
    assert parse_field_selector("spec.type=ClusterIP,spec.clusterIP=None", "services").matches(
        {
            "metadata": {"name": "s", "namespace": "ml"},
            "spec": {"type": "ClusterIP", "clusterIP": "None"},
        }
    )
    assert parse_field_selector("status.replicas=0", "replicationcontrollers").matches(
        {"metadata": {"name": "rc", "namespace": "ml"}, "status": {}}
    )


@pytest.mark.parametrize(
    ("text", "resource", "message"),
    [
        ("spec.foo=bar", "pods", "field label not supported: spec.foo"),
        ("status.qosClass=BestEffort", "pods", "field label not supported: status.qosClass"),
        ("spec.foo=1,spec.bar=2", "pods", "field label not supported: spec.bar"),
        ("metadata.namespace=default", "nodes", "field label not supported: metadata.namespace"),
        ("spec.providerID=x", "nodes", "field label not supported: spec.providerID"),
        ("message=x", "events", "field label not supported: message"),
        ("metadata.namespace=x", "namespaces", "field label not supported: metadata.namespace"),
        (
            "spec.replicas=1",
            "deployments",
            '"spec.replicas" is not a known field selector: only "metadata.name", '
            '"metadata.namespace"',
        ),
        (
            "foo.bar=baz",
            "ingresses",
            '"foo.bar" is not a known field selector: only "metadata.name", "metadata.namespace"',
        ),
        (
            "spec.nodeName",
            "pods",
            "invalid selector: 'spec.nodeName'; can't understand 'spec.nodeName'",
        ),
        (
            "status.phase=Running,gpu-a1",
            "pods",
            "invalid selector: 'status.phase=Running,gpu-a1'; can't understand 'gpu-a1'",
        ),
        ("metadata.name=a=b", "pods", "invalid field selector: unescaped character in value: 61"),
        ("metadata.name===b", "pods", "invalid field selector: unescaped character in value: 61"),
        (r"metadata.name=a\x", "pods", r"invalid field selector: invalid escape sequence: \x"),
        ("metadata.name=a\\", "pods", "invalid field selector: invalid escape sequence: \\"),
        # Every term is parsed before any field label is converted.
        (r"aaa=1,zzz=a\q", "pods", r"invalid field selector: invalid escape sequence: \q"),
        # A space is part of the field label, as on the server.
        (" spec.nodeName=x", "pods", "field label not supported:  spec.nodeName"),
    ],
)
def test_field_selector_errors(text: str, resource: str, message: str) -> None:
    with pytest.raises(SelectorError) as caught:
        parse_field_selector(text, resource)
    assert str(caught.value) == message
