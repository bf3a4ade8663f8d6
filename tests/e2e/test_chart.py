"""The Helm chart (helm/gpubot): lint, render over a matrix of values, every object checked
against the Kubernetes schemas, bad values refused, the restricted Pod Security profile.

Helm runs in-process through helm-python-sdk (Helm v4's Go SDK, no binary), the schemas are
kubernetes-validate's (offline, strict: an unknown field is an error). Both are in the `dev`
extra.
"""

from __future__ import annotations

import itertools
import re
import shlex
from typing import Any

import pytest
import yaml

from bot.config import Settings
from bot.kube.permissions import required
from tests.helpers.paths import REPO

helm = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")
kubernetes_validate = pytest.importorskip("kubernetes_validate")

ROOT = REPO
CHART = ROOT / "helm" / "gpubot"
NAMESPACE = "gpu-ops"
RELEASE = "gpubot"
# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and the newest schema.
KUBE_VERSIONS = ("1.27.0", kubernetes_validate.latest_version())
# kubernetes-validate has the built-in kinds only. No package on PyPI ships the Prometheus
# Operator's CRD schemas strictly (cloudcoil's models accept unknown fields), so these are
# checked field by field below instead (test_prometheus_operator_objects).
CRD_KINDS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("monitoring.coreos.com/v1alpha1", "AlertmanagerConfig"),
}

POSTGRES = "postgresql://gpubot:secret@postgres.db.svc:5432/gpubot"

MATRIX: dict[str, dict[str, Any]] = {
    "defaults": {},
    "two-replicas-postgresql": {
        "replicas": 2,
        "store": {"url": POSTGRES},
        "dbUpgrade": {"hook": {"enabled": True}},
    },
    "slack-http": {
        "slack": {"mode": "http", "channel": "C0123456789"},
        "secrets": {"slackBotToken": "xoxb-1", "slackSigningSecret": "s3cr3t"},
    },
    "slack-socket-mode": {
        "slack": {"mode": "socket", "channel": "C0123456789"},
        "secrets": {"slackBotToken": "xoxb-1", "slackAppToken": "xapp-1"},
    },
    "prometheus-operator": {
        "prometheusOperator": {
            "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
            "prometheusRule": {"enabled": True},
            "alertmanagerConfig": {"enabled": True, "labels": {"alertmanagerConfig": "gpubot"}},
        },
        "networkPolicy": {
            "enabled": True,
            "from": [
                {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}
                    }
                }
            ],
        },
        "rbac": {"allowForceDrain": True},
        "rules": {"custom": {"site.yaml": "rules: []\n"}},
    },
    "existing-secret": {"existingSecret": "gpubot-secrets", "replicas": 3},
    "sqlite-migrate-on-start": {
        "dbUpgrade": {"initContainer": {"enabled": True}},
        "persistence": {"existingClaim": "gpubot-data", "storageClass": "fast"},
        "image": {"repository": "registry.example/gpubot", "digest": "sha256:" + "a" * 64},
        "smokeTest": {"image": "registry.example/cuda:12.4.1-base-ubuntu22.04"},
    },
}


def render(values: dict[str, Any]) -> dict[str, str]:
    with helm.Chart.load(str(CHART)) as chart:
        rendered: dict[str, str] = chart.render(
            values, name=RELEASE, namespace=NAMESPACE, is_install=True
        )
    return rendered


def objects(values: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for path, text in render(values).items():
        if not path.endswith((".yaml", ".yml")):
            continue
        found += [doc for doc in yaml.safe_load_all(text) if doc]
    return found


def by_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


@pytest.fixture(scope="module", params=sorted(MATRIX))
def case(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    return request.param, objects(MATRIX[request.param])


# ---- lint and schema validation -----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MATRIX))
def test_helm_lint_is_clean(name: str) -> None:
    report = helm.lint(str(CHART), MATRIX[name], strict=True, namespace=NAMESPACE)
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert not report["errors"] and not problems, report


def test_every_object_is_valid_for_kubernetes(case: tuple[str, list[dict[str, Any]]]) -> None:
    name, objs = case
    assert objs, name
    for obj in objs:
        if (obj["apiVersion"], obj["kind"]) in CRD_KINDS:
            continue
        for version in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                where = f"{obj['kind']}/{obj['metadata']['name']} ({name}, Kubernetes {version})"
                pytest.fail(f"{where}: {exc.message} at {list(exc.path)}")
        metadata = obj["metadata"]
        assert metadata["labels"]["app.kubernetes.io/instance"] == RELEASE
        if obj["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            assert metadata["namespace"] == NAMESPACE, obj["kind"]


# ---- bad values ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"replicas": 2}, ["/store/url", "postgres", "/existingSecret"]),
        ({"replicas": 2, "store": {"url": "sqlite:////var/lib/gpubot/gpubot.db"}}, ["/store/url"]),
        ({"port": -1}, ["/port", "minimum"]),
        ({"port": 70000}, ["/port", "maximum"]),
        ({"service": {"port": 0}}, ["/service/port"]),
        ({"slack": {"mode": "rtm"}}, ["/slack/mode", "http", "socket"]),
        ({"slack": {"channel": "#gpu-oncall"}}, ["/slack/channel"]),
        ({"secrets": {"slackBotToken": "xapp-wrong"}}, ["/secrets/slackBotToken"]),
        ({"dbUpgrade": {"hook": {"enabled": True}}}, ["/store/url", "/existingSecret"]),
        ({"replicaCount": 2}, ["replicaCount"]),
        ({"config": {"serve": {"bearer_token": "x"}}}, ["/config/serve/bearer_token"]),
        ({"config": {"rules_dir": "/rules"}}, ["/config/rules_dir"]),
        ({"logLevel": "verbose"}, ["/logLevel"]),
        ({"smokeTest": {"enabled": "yes"}}, ["/smokeTest/enabled", "boolean"]),
        ({"smokeTest": {"gpus": 8}}, ["/smokeTest", "gpus"]),
    ],
)
def test_bad_values_are_refused_by_the_schema(values: dict[str, Any], expected: list[str]) -> None:
    with pytest.raises(helm.HelmValuesError) as refused:
        render(values)
    message = str(refused.value)
    assert "schema" in message
    for part in expected:
        assert part in message, message


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (
            {"secrets": {"slackBotToken": "xoxb-1", "slackSigningSecret": "s"}},
            "slack.channel is required",
        ),
        (
            {
                "slack": {"mode": "socket", "channel": "C1"},
                "secrets": {"slackBotToken": "xoxb-1"},
            },
            "secrets.slackAppToken",
        ),
        (
            {
                "replicas": 2,
                "store": {"url": POSTGRES},
                "dbUpgrade": {"initContainer": {"enabled": True}},
            },
            "use dbUpgrade.hook",
        ),
    ],
)
def test_values_the_schema_cannot_judge_fail_the_render(
    values: dict[str, Any], expected: str
) -> None:
    with pytest.raises(helm.HelmError) as refused:
        render(values)
    assert expected in str(refused.value)


# ---- the pod ------------------------------------------------------------------------------------


def pod_specs(objs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{o['kind']}/{o['metadata']['name']}", o["spec"]["template"]["spec"])
        for o in objs
        if o["kind"] in ("Deployment", "Job")
    ]


def test_pods_pass_the_restricted_pod_security_profile(
    case: tuple[str, list[dict[str, Any]]],
) -> None:
    """Pod Security Standards, "restricted" (v1.27+), checked field by field, and the image's
    expectations: uid 10001, read-only root, writable /tmp and /var/lib/gpubot."""
    _, objs = case
    allowed_volumes = {
        "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
        "persistentVolumeClaim", "projected", "secret",
    }  # fmt: skip
    for where, spec in pod_specs(objs):
        pod_sc = spec.get("securityContext", {})
        for flag in ("hostNetwork", "hostPID", "hostIPC"):
            assert not spec.get(flag), where
        for volume in spec.get("volumes", []):
            assert set(volume) - {"name"} <= allowed_volumes, (where, volume)
        assert pod_sc["seccompProfile"]["type"] == "RuntimeDefault", where
        assert pod_sc["runAsNonRoot"] is True and pod_sc["runAsUser"] == 10001, where
        for container in spec["containers"] + spec.get("initContainers", []):
            sc = container["securityContext"]
            label = f"{where} {container['name']}"
            assert sc["allowPrivilegeEscalation"] is False, label
            assert sc["capabilities"]["drop"] == ["ALL"], label
            assert not sc["capabilities"].get("add"), label
            assert not sc.get("privileged"), label
            assert sc.get("runAsNonRoot", pod_sc["runAsNonRoot"]) is True, label
            assert sc.get("runAsUser", pod_sc["runAsUser"]) == 10001, label
            assert sc.get("seccompProfile", pod_sc["seccompProfile"])["type"] == "RuntimeDefault"
            assert sc["readOnlyRootFilesystem"] is True, label
            assert not container.get("ports") or all(
                "hostPort" not in p for p in container["ports"]
            )
            mounts = {m["mountPath"] for m in container["volumeMounts"]}
            assert {"/tmp", "/var/lib/gpubot"} <= mounts, label


def test_the_deployment_runs_serve_with_its_settings_and_secrets(
    case: tuple[str, list[dict[str, Any]]],
) -> None:
    name, objs = case
    (deployment,) = by_kind(objs, "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["args"][:4] == [
        "serve",
        "--config",
        "/etc/gpubot/config/settings.yaml",
        "--in-cluster",
    ]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"]["requests"] and container["resources"]["limits"]
    env = {e["name"]: e for e in container["env"]}
    secret = MATRIX[name].get("existingSecret", RELEASE)
    for variable in (
        "GPUBOT_SERVE__BEARER_TOKEN",
        "GPUBOT_SLACK__BOT_TOKEN",
        "GPUBOT_SLACK__SIGNING_SECRET",
        "GPUBOT_SLACK__APP_TOKEN",
        "GPUBOT_STORE_URL",
    ):
        assert env[variable]["valueFrom"]["secretKeyRef"]["name"] == secret, variable
    assert not env["GPUBOT_SERVE__BEARER_TOKEN"]["valueFrom"]["secretKeyRef"].get("optional")

    (configmap,) = [c for c in by_kind(objs, "ConfigMap") if c["metadata"]["name"] == RELEASE]
    settings = yaml.safe_load(configmap["data"]["settings.yaml"])
    assert settings["serve"]["lease_namespace"] == NAMESPACE
    assert settings["serve"]["port"] == container["ports"][0]["containerPort"]
    # A bare `gpubot serve` listens on loopback only; the pod must answer on its address.
    assert settings["serve"]["host"] == "0.0.0.0"
    assert settings["slack"]["mode"] == MATRIX[name].get("slack", {}).get("mode", "http")
    # Every key is one gpubot knows: Settings forbids unknown ones.
    from bot.config import Settings

    Settings.model_validate(settings)
    # The smoke-test pods go to the release namespace, where the Role lets gpubot make them.
    smoke = Settings.model_validate(settings).remediation.smoke_test
    assert (smoke.enabled, smoke.namespace) == (True, NAMESPACE)
    assert smoke.image == MATRIX[name].get("smokeTest", {}).get(
        "image", Settings().remediation.smoke_test.image
    )

    replicas = deployment["spec"]["replicas"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    if replicas > 1:
        assert "persistentVolumeClaim" not in volumes["data"]
        assert spec["topologySpreadConstraints"]
        assert spec["affinity"]["podAntiAffinity"]
    else:
        assert deployment["spec"]["strategy"]["type"] == "Recreate"
        assert "persistentVolumeClaim" in volumes["data"]


def test_secret_holds_what_was_given(case: tuple[str, list[dict[str, Any]]]) -> None:
    name, objs = case
    secrets = by_kind(objs, "Secret")
    if "existingSecret" in MATRIX[name]:
        assert secrets == []
        return
    (secret,) = secrets
    keys = set(secret["data"])
    assert "bearer-token" in keys
    assert ("store-url" in keys) == bool(MATRIX[name].get("store", {}).get("url"))
    assert ("slack-app-token" in keys) == ("slackAppToken" in MATRIX[name].get("secrets", {}))


# ---- RBAC ---------------------------------------------------------------------------------------


def rules_of(obj: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in obj["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


@pytest.mark.parametrize(("force", "smoke"), [(False, True), (True, True), (False, False)])
def test_rbac_is_what_gpubot_does(force: bool, smoke: bool) -> None:
    """The chart grants exactly the permissions `gpubot serve` checks at start with the
    settings the chart writes (one list, `bot.kube.permissions.required`): cluster-wide ones
    in the ClusterRole, the Lease's and the smoke-test pods' in the Role; plus pod deletion
    when force drains are allowed."""
    objs = objects({"rbac": {"allowForceDrain": force}, "smokeTest": {"enabled": smoke}})
    (configmap,) = [c for c in by_kind(objs, "ConfigMap") if c["metadata"]["name"] == RELEASE]
    settings = yaml.safe_load(configmap["data"]["settings.yaml"])
    assert settings["remediation"]["smoke_test"]["enabled"] is smoke
    needed = required(Settings(**settings))
    assert all(p.namespace in ("", NAMESPACE) for p in needed)
    as_rules = {
        (p.group, p.resource + (f"/{p.subresource}" if p.subresource else ""), p.verb): p
        for p in needed
    }
    (cluster_role,) = by_kind(objs, "ClusterRole")
    granted = rules_of(cluster_role)
    assert ("", "pods", "delete") in granted if force else ("", "pods", "delete") not in granted
    granted.discard(("", "pods", "delete"))
    assert granted == {rule for rule, p in as_rules.items() if not p.namespace}
    (role,) = by_kind(objs, "Role")
    assert rules_of(role) == {rule for rule, p in as_rules.items() if p.namespace}
    lease_rule = next(
        r for r in role["rules"] if "get" in r["verbs"] and "leases" in r["resources"]
    )
    assert lease_rule["resourceNames"] == [settings["serve"]["lease_name"]]
    for binding in by_kind(objs, "ClusterRoleBinding") + by_kind(objs, "RoleBinding"):
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": RELEASE, "namespace": NAMESPACE}
        ]


# ---- Prometheus Operator objects ----------------------------------------------------------------


def test_prometheusrule_copy_is_deploy_prometheus() -> None:
    """A chart cannot read outside its directory: files/prometheusrule.yaml is a copy of
    deploy/prometheus/prometheusrule.yaml, which stays the one to edit."""
    shipped = ROOT / "deploy" / "prometheus" / "prometheusrule.yaml"
    copy = CHART / "files" / "prometheusrule.yaml"
    assert copy.read_text() == shipped.read_text(), (
        f"cp {shipped.relative_to(ROOT)} {copy.relative_to(ROOT)}"
    )


def test_prometheus_operator_objects() -> None:
    objs = objects(MATRIX["prometheus-operator"])
    (rule,) = by_kind(objs, "PrometheusRule")
    shipped = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheusrule.yaml").read_text())
    assert rule["apiVersion"] == shipped["apiVersion"]
    assert rule["spec"] == shipped["spec"]
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"

    (monitor,) = by_kind(objs, "ServiceMonitor")
    (service,) = by_kind(objs, "Service")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert set(monitor["spec"]) == {"selector", "endpoints"}
    assert monitor["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "30s"}]
    assert service["spec"]["ports"][0]["name"] == "http"

    (amc,) = by_kind(objs, "AlertmanagerConfig")
    receiver = yaml.safe_load((ROOT / "deploy" / "alertmanager" / "receiver.yaml").read_text())
    route = amc["spec"]["route"]
    assert route["receiver"] == "gpubot"
    assert route["groupBy"] == receiver["route"]["group_by"]
    (webhook,) = amc["spec"]["receivers"][0]["webhookConfigs"]
    assert webhook["url"] == f"http://{RELEASE}.{NAMESPACE}.svc:8080/alertmanager"
    assert webhook["sendResolved"] is True
    # The same cap as the plain receiver: a body within serve.max_body_bytes (issue 31, item 6).
    assert webhook["maxAlerts"] == receiver["receivers"][0]["webhook_configs"][0]["max_alerts"]
    assert webhook["httpConfig"]["authorization"]["credentials"] == {
        "name": RELEASE,
        "key": "bearer-token",
    }
    # The alerts it routes are the ones the shipped rules raise.
    raised = {r["alert"] for g in shipped["spec"]["groups"] for r in g["rules"] if "alert" in r}
    assert set(route["matchers"][0]["value"].split("|")) == raised


# ---- the rest -----------------------------------------------------------------------------------


def test_db_upgrade_hook_runs_before_an_upgrade() -> None:
    objs = objects(MATRIX["two-replicas-postgresql"])
    (job,) = by_kind(objs, "Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-upgrade"
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["db", "upgrade"]
    env = {e["name"]: e for e in container["env"]}
    assert env["GPUBOT_STORE_URL"]["valueFrom"]["secretKeyRef"]["key"] == "store-url"
    assert by_kind(objects({}), "Job") == []


def test_custom_rules_replace_the_shipped_ones() -> None:
    objs = objects(MATRIX["prometheus-operator"])
    (rules,) = [c for c in by_kind(objs, "ConfigMap") if c["metadata"]["name"].endswith("-rules")]
    assert rules["data"] == {"site.yaml": "rules: []\n"}
    (deployment,) = by_kind(objs, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert {"name": "rules", "mountPath": "/etc/gpubot/rules", "readOnly": True} in container[
        "volumeMounts"
    ]


def test_notes_tell_the_next_three_steps() -> None:
    notes = render({})[f"{CHART.name}/templates/NOTES.txt"]
    for step in ("1. Alertmanager", "2. Slack", "3. A test alert"):
        assert step in notes
    assert f"http://{RELEASE}.{NAMESPACE}.svc:8080/alertmanager" in notes
    # The smoke-test image the nodes must pull is named, as gpubot's default.
    from bot.config import SmokeTestSettings

    assert f"from {SmokeTestSettings().image}:" in notes
    mirrored = render({"smokeTest": {"image": "registry.example/cuda:12"}})
    assert "from registry.example/cuda:12:" in mirrored[f"{CHART.name}/templates/NOTES.txt"]
    off = render({"smokeTest": {"enabled": False}})[f"{CHART.name}/templates/NOTES.txt"]
    assert "smoke-test" not in off


def deep_merge(into: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            deep_merge(into[key], value)
        else:
            into[key] = value
    return into


@pytest.mark.parametrize("doc", ["docs/install.md", "README.md"])
def test_the_documented_install_command_renders(doc: str) -> None:
    """The `helm install` of docs/install.md and the README, its --set and --set-json values
    as Helm parses them."""
    text = (ROOT / doc).read_text()
    block = re.search(r"```sh\n(helm install .*?)```", text, re.S)
    assert block, f"no helm install command in {doc}"
    words = shlex.split(block.group(1).replace("\\\n", " "))
    values: dict[str, Any] = {}
    for flag, argument in itertools.pairwise(words):
        if flag == "--set":
            deep_merge(values, helm.parse_set_string(argument))
        elif flag == "--set-json":
            deep_merge(values, helm.parse_set_json(argument))
    assert values["image"]["repository"] and values["secrets"]["slackBotToken"]
    namespace = words[words.index("--namespace") + 1]
    with helm.Chart.load(str(CHART)) as chart:
        rendered = chart.render(values, name=words[2], namespace=namespace, is_install=True)
    objs = [
        d for p, t in rendered.items() if p.endswith(".yaml") for d in yaml.safe_load_all(t) if d
    ]
    for obj in objs:
        if (obj["apiVersion"], obj["kind"]) not in CRD_KINDS:
            kubernetes_validate.validate(obj, KUBE_VERSIONS[-1], strict=True)
    (configmap,) = [c for c in by_kind(objs, "ConfigMap") if c["metadata"]["name"] == "gpubot"]
    settings = yaml.safe_load(configmap["data"]["settings.yaml"])
    assert settings["remediation"]["approvals"]["drain"] == {
        "groups": ["gpu-oncall"],
        "two_person": True,
    }
    # The smoke-test pods go where the Role lets gpubot create them: the release namespace.
    assert settings["remediation"]["smoke_test"] == {"enabled": True, "namespace": namespace}
    (role,) = by_kind(objs, "Role")
    assert role["metadata"]["namespace"] == namespace
    assert {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete"]} in role[
        "rules"
    ]
