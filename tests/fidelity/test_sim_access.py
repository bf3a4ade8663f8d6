"""Who may do what on the simulated cluster, seen through the real kubectl: HTTPS verified
against the cluster's CA, bearer tokens (the admin's, a ServiceAccount's), RBAC decided and
refused as kube-apiserver does (its 403 text, word for word), and `kubectl auth can-i` /
`whoami` answered from the same rules.

The refusal texts are kube-apiserver's: staging/src/k8s.io/apiserver/pkg/endpoints/handlers/
responsewriters/errors.go (`forbiddenMessage`) inside apimachinery's `NewForbidden`, which
kubectl prints after `Error from server (Forbidden): `.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from gpusim.apiserver import SimulatedApiServer
from gpusim.resources import BY_KIND
from gpusim.scenarios import healthy_cluster
from gpusim.state import ClusterState
from tests.helpers.kubectl import Kubectl, kubectl_as, kubectl_for, needs_kubectl, rows

pytestmark = needs_kubectl

NS = "gpubot"
RBAC = f"""
apiVersion: v1
kind: ServiceAccount
metadata: {{name: gpubot, namespace: {NS}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: nobody, namespace: {NS}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: gpubot-reader}}
rules:
  - apiGroups: [""]
    resources: [nodes]
    verbs: [get, list, watch]
  - apiGroups: [""]
    resources: [pods/eviction]
    verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: gpubot-reader}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: gpubot-reader}}
subjects: [{{kind: ServiceAccount, name: gpubot, namespace: {NS}}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: leader, namespace: {NS}}}
rules:
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    resourceNames: [gpubot-leader]
    verbs: [get, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: leader, namespace: {NS}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: leader}}
subjects: [{{kind: ServiceAccount, name: gpubot}}]
"""
SA_USER = f"system:serviceaccount:{NS}:gpubot"


@pytest.fixture
def cluster() -> Iterator[SimulatedApiServer]:
    store = ClusterState()
    store.load(healthy_cluster(2, datetime.now(UTC))["items"])
    server = SimulatedApiServer(store).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def admin(cluster: SimulatedApiServer, tmp_path: Path) -> Kubectl:
    return kubectl_as(cluster, tmp_path)


@pytest.fixture
def bound(cluster: SimulatedApiServer, admin: Kubectl, tmp_path: Path) -> Kubectl:
    """kubectl as the gpubot ServiceAccount, after the admin applied RBAC with kubectl."""
    (tmp_path / "rbac.yaml").write_text(RBAC)
    applied = admin("apply", "-f", str(tmp_path / "rbac.yaml"))
    assert applied.returncode == 0, applied.stderr
    return kubectl_as(cluster, tmp_path, (NS, "gpubot"))


# ---- TLS and tokens --------------------------------------------------------------------------


def test_the_kubeconfig_trusts_the_clusters_ca_and_nothing_is_skipped(
    cluster: SimulatedApiServer, admin: Kubectl, tmp_path: Path
) -> None:
    config = yaml.safe_load((tmp_path / "kubeconfig").read_text())
    entry = config["clusters"][0]["cluster"]
    assert entry["server"].startswith("https://127.0.0.1:")
    assert set(entry) == {"server", "certificate-authority-data"}  # verification stays on
    assert base64.b64decode(entry["certificate-authority-data"]) == cluster.credentials.ca_pem
    done = admin("get", "nodes", "-o", "name")
    assert done.returncode == 0, done.stderr
    assert "node/gpu-a1" in done.stdout.split()


def test_a_client_that_does_not_trust_the_ca_is_refused_by_kubectl(
    cluster: SimulatedApiServer, tmp_path: Path
) -> None:
    other = SimulatedApiServer(ClusterState())  # another cluster, another CA
    config = yaml.safe_load(cluster.write_kubeconfig(tmp_path / "kubeconfig").read_text())
    config["clusters"][0]["cluster"]["certificate-authority-data"] = other.credentials.ca_data
    (tmp_path / "wrong-ca").write_text(yaml.safe_dump(config))
    done = kubectl_for(tmp_path / "wrong-ca", tmp_path)("get", "nodes")
    assert done.returncode != 0
    assert "x509: certificate signed by unknown authority" in done.stderr


def test_a_token_nobody_issued_is_unauthorized(cluster: SimulatedApiServer, tmp_path: Path) -> None:
    config = yaml.safe_load(cluster.write_kubeconfig(tmp_path / "kubeconfig").read_text())
    config["users"][0]["user"]["token"] = "not-a-token"
    (tmp_path / "bad-token").write_text(yaml.safe_dump(config))
    done = kubectl_for(tmp_path / "bad-token", tmp_path)("get", "nodes")
    assert done.returncode == 1
    # kube-apiserver answers 401 with Status "Unauthorized"; client-go words it so.
    assert (
        "error: You must be logged in to the server "
        "(the server has asked for the client to provide credentials)"
    ) in done.stderr
    # The audit log has it as nobody's 401 (kubectl's discovery, the first request, refused).
    assert {(e.user, e.verb, e.path, e.code) for e in cluster.audit()} == {("", "get", "/api", 401)}


def test_whoami_names_the_admin_and_the_service_account(admin: Kubectl, bound: Kubectl) -> None:
    me = admin("auth", "whoami", "-o", "json")
    assert me.returncode == 0, me.stderr
    info = json.loads(me.stdout)["status"]["userInfo"]
    assert info["username"] == "kubernetes-admin"
    assert "kubeadm:cluster-admins" in info["groups"]
    sa = json.loads(bound("auth", "whoami", "-o", "json").stdout)["status"]["userInfo"]
    assert sa["username"] == SA_USER
    assert sa["groups"] == [
        "system:serviceaccounts",
        f"system:serviceaccounts:{NS}",
        "system:authenticated",
    ]


def test_each_service_account_has_its_projected_token_volume(
    cluster: SimulatedApiServer, bound: Kubectl
) -> None:
    directory = cluster.service_account_dir(NS, "gpubot")
    assert (directory / "namespace").read_text() == NS
    assert (directory / "ca.crt").read_bytes() == cluster.credentials.ca_pem
    assert (directory / "token").read_text() == cluster.service_account_token(NS, "gpubot")
    assert cluster.service_account_token(NS, "nobody") != cluster.service_account_token(
        NS, "gpubot"
    )


# ---- RBAC ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "answer"),
    [
        (("list", "nodes"), "yes"),
        (("watch", "nodes"), "yes"),
        (("patch", "nodes"), "no"),
        (("create", "pods", "--subresource=eviction", "-n", "ml"), "yes"),
        (("create", "pods", "-n", "ml"), "no"),
        (("delete", "pods", "-n", "ml"), "no"),
        (("get", "leases/gpubot-leader", "-n", NS), "yes"),
        (("update", "leases/gpubot-leader", "-n", NS), "yes"),
        (("get", "leases/someone-else", "-n", NS), "no"),
        (("get", "leases/gpubot-leader", "-n", "default"), "no"),
    ],
)
def test_can_i_answers_from_the_bindings(
    bound: Kubectl, args: tuple[str, ...], answer: str
) -> None:
    done = bound("auth", "can-i", *args)
    assert done.stdout.strip() == answer, done.stderr
    assert done.returncode == (0 if answer == "yes" else 1)


def test_an_unbound_service_account_may_do_nothing_but_ask(
    cluster: SimulatedApiServer, bound: Kubectl, tmp_path: Path
) -> None:
    nobody = kubectl_as(cluster, tmp_path, (NS, "nobody"))
    for args in (("list", "nodes"), ("create", "pods", "--subresource=eviction", "-n", "ml")):
        done = nobody("auth", "can-i", *args)
        assert (done.stdout.strip(), done.returncode) == ("no", 1), done.stderr
    # What every authenticated user may do (system:basic-user, system:discovery):
    assert nobody("auth", "can-i", "create", "selfsubjectaccessreviews").stdout.strip() == "yes"
    assert nobody("auth", "can-i", "get", "/api").stdout.strip() == "yes"


def test_a_forbidden_request_prints_kube_apiservers_message(
    cluster: SimulatedApiServer, bound: Kubectl
) -> None:
    refusal = (
        'nodes "gpu-a1" is forbidden: User "system:serviceaccount:gpubot:gpubot" cannot patch '
        'resource "nodes" in API group "" at the cluster scope'
    )
    patched = bound("patch", "node", "gpu-a1", "-p", '{"spec":{"unschedulable":true}}')
    assert patched.returncode == 1
    assert patched.stderr.strip() == f"Error from server (Forbidden): {refusal}"
    cordoned = bound("cordon", "gpu-a1")  # kubectl cordon reports the refusal its own way
    assert cordoned.stderr.strip() == f'error: unable to cordon node "gpu-a1": {refusal}'
    assert not cluster.store.get(BY_KIND["Node"], "", "gpu-a1")["spec"].get("unschedulable")
    listed = bound("get", "pods", "-n", "ml")
    assert listed.returncode == 1
    assert (
        'Error from server (Forbidden): pods is forbidden: User "system:serviceaccount:gpubot:'
        'gpubot" cannot list resource "pods" in API group "" in the namespace "ml"'
    ) in listed.stderr
    # The audit log: each refusal as the ServiceAccount's 403, with the RBAC verb and resource.
    forbidden = {
        (e.verb, e.resource, e.name, e.namespace) for e in cluster.audit() if e.code == 403
    }
    assert forbidden == {("patch", "nodes", "gpu-a1", ""), ("list", "pods", "", "ml")}
    assert {e.user for e in cluster.audit() if e.code == 403} == {SA_USER}
    assert any(
        (e.user, e.verb, e.resource, e.code) == (SA_USER, "get", "nodes", 200)
        for e in cluster.audit()
    )  # kubectl cordon read the node first


def test_a_binding_to_a_missing_role_says_so_in_the_refusal(
    cluster: SimulatedApiServer, admin: Kubectl, tmp_path: Path
) -> None:
    (tmp_path / "dangling.yaml").write_text(
        f"""
apiVersion: v1
kind: ServiceAccount
metadata: {{name: dangling, namespace: {NS}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: dangling}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: not-there}}
subjects: [{{kind: ServiceAccount, name: dangling, namespace: {NS}}}]
"""
    )
    assert admin("apply", "-f", str(tmp_path / "dangling.yaml")).returncode == 0
    done = kubectl_as(cluster, tmp_path, (NS, "dangling"))("get", "nodes")
    assert done.returncode == 1
    assert done.stderr.strip().endswith(
        'cannot list resource "nodes" in API group "" at the cluster scope: RBAC: '
        'clusterrole.rbac.authorization.k8s.io "not-there" not found'
    )


def test_can_i_list_shows_the_service_accounts_rules(bound: Kubectl) -> None:
    done = bound("auth", "can-i", "--list", "-n", NS)
    assert done.returncode == 0, done.stderr
    listed = {row["Resources"]: row for row in rows(done.stdout) if row["Resources"]}
    assert listed["nodes"]["Verbs"] == "[get list watch]"
    assert listed["pods/eviction"]["Verbs"] == "[create]"
    assert listed["leases.coordination.k8s.io"]["Resource Names"] == "[gpubot-leader]"
    assert listed["leases.coordination.k8s.io"]["Verbs"] == "[get update]"
    assert listed["selfsubjectaccessreviews.authorization.k8s.io"]["Verbs"] == "[create]"
    assert "pods" not in listed


def test_the_bootstrap_roles_are_there_as_in_a_kubeadm_cluster(admin: Kubectl) -> None:
    roles = admin("get", "clusterroles", "-o", "name")
    assert roles.returncode == 0, roles.stderr
    for role in ("cluster-admin", "system:discovery", "system:basic-user", "view"):
        assert f"clusterrole.rbac.authorization.k8s.io/{role}" in roles.stdout.split()
    binding = admin("get", "clusterrolebinding", "kubeadm:cluster-admins", "-o", "wide")
    assert binding.returncode == 0, binding.stderr
    assert "ClusterRole/cluster-admin" in binding.stdout
    assert "kubeadm:cluster-admins" in binding.stdout


def test_an_aggregated_cluster_role_grants_what_its_parts_grant(
    cluster: SimulatedApiServer, admin: Kubectl, bound: Kubectl, tmp_path: Path
) -> None:
    (tmp_path / "view.yaml").write_text(
        f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: viewer, namespace: ml}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}}
subjects: [{{kind: ServiceAccount, name: gpubot, namespace: {NS}}}]
"""
    )
    assert bound("auth", "can-i", "list", "pods", "-n", "ml").stdout.strip() == "no"
    assert admin("apply", "-f", str(tmp_path / "view.yaml")).returncode == 0
    assert bound("auth", "can-i", "list", "pods", "-n", "ml").stdout.strip() == "yes"
    assert bound("auth", "can-i", "get", "pods/log", "-n", "ml").stdout.strip() == "yes"
    assert bound("auth", "can-i", "delete", "pods", "-n", "ml").stdout.strip() == "no"
    listed = bound("get", "pods", "-n", "ml", "-o", "name")
    assert listed.returncode == 0, listed.stderr
    assert "pod/train-llm-0-worker-0" in listed.stdout.split()
