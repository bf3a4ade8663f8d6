"""`kubectl --as`, `--as-group` and `--as-uid` on the simulated cluster, through the real
kubectl: the answer is the impersonated user's, and only a caller RBAC lets `impersonate`
gets it, as kube-apiserver's impersonation filter decides
(staging/src/k8s.io/apiserver/pkg/endpoints/filters/impersonation.go `WithImpersonation`).

What an operator relies on: `kubectl auth can-i VERB RESOURCE --as=system:serviceaccount:NS:NAME`
is how the Kubernetes docs tell one to check a ServiceAccount's RBAC (reference/access-authn-
authz/authorization "Checking API access"); answered as the admin, it says yes to everything.
The refusal texts are `responsewriters.Forbidden`'s for the impersonation's attributes (verb
`impersonate` on `users`, `groups`, `serviceaccounts`, `uids` or `userextras/KEY`), which
kubectl prints after `Error from server (Forbidden): `.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from gpusim.apiserver import SimulatedApiServer
from gpusim.scenarios import healthy_cluster
from gpusim.state import ClusterState
from tests.helpers.kubeapi import connection
from tests.helpers.kubectl import Kubectl, kubectl_as, kubectl_for, needs_kubectl

pytestmark = needs_kubectl

NS = "gpubot"
SA_USER = f"system:serviceaccount:{NS}:gpubot"
RBAC = f"""
apiVersion: v1
kind: ServiceAccount
metadata: {{name: gpubot, namespace: {NS}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: support, namespace: {NS}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: node-reader}}
rules:
  - apiGroups: [""]
    resources: [nodes]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: node-reader}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: node-reader}}
subjects:
  - {{kind: ServiceAccount, name: gpubot, namespace: {NS}}}
  - {{kind: Group, name: oncall, apiGroup: rbac.authorization.k8s.io}}
---
# `support` may act as alice (and as her group `oncall`), and as no one else.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: act-as-alice}}
rules:
  - apiGroups: [""]
    resources: [users]
    resourceNames: [alice]
    verbs: [impersonate]
  - apiGroups: [""]
    resources: [groups]
    resourceNames: [oncall]
    verbs: [impersonate]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: act-as-alice}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: act-as-alice}}
subjects: [{{kind: ServiceAccount, name: support, namespace: {NS}}}]
"""


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
    """kubectl as kubeadm's admin (cluster-admin may impersonate anyone), RBAC applied."""
    kubectl = kubectl_as(cluster, tmp_path)
    (tmp_path / "rbac.yaml").write_text(RBAC)
    applied = kubectl("apply", "-f", str(tmp_path / "rbac.yaml"))
    assert applied.returncode == 0, applied.stderr
    return kubectl


def whoami(kubectl: Kubectl, *args: str) -> dict[str, object]:
    done = kubectl("auth", "whoami", "-o", "json", *args)
    assert done.returncode == 0, done.stderr
    info: dict[str, object] = json.loads(done.stdout)["status"]["userInfo"]
    return info


@pytest.mark.parametrize(
    ("args", "answer"),
    [
        (("delete", "nodes"), "no"),
        (("patch", "nodes"), "no"),
        (("list", "nodes"), "yes"),
        (("list", "pods", "-n", "ml"), "no"),
        (("create", "selfsubjectaccessreviews"), "yes"),  # system:basic-user, as every SA
    ],
)
def test_can_i_as_a_service_account_answers_for_the_service_account(
    admin: Kubectl, args: tuple[str, ...], answer: str
) -> None:
    done = admin("auth", "can-i", *args, f"--as={SA_USER}")
    assert done.stdout.strip() == answer, done.stderr
    assert done.returncode == (0 if answer == "yes" else 1)


def test_can_i_as_a_user_takes_the_groups_given_with_as_group(admin: Kubectl) -> None:
    alone = admin("auth", "can-i", "list", "nodes", "--as=alice")
    assert (alone.stdout.strip(), alone.returncode) == ("no", 1), alone.stderr
    grouped = admin("auth", "can-i", "list", "nodes", "--as=alice", "--as-group=oncall")
    assert (grouped.stdout.strip(), grouped.returncode) == ("yes", 0), grouped.stderr
    listed = admin("get", "nodes", "-o", "name", "--as=alice", "--as-group=oncall")
    assert listed.returncode == 0, listed.stderr
    assert "node/gpu-a1" in listed.stdout.split()
    refused = admin("get", "pods", "-n", "ml", "--as=alice", "--as-group=oncall")
    assert refused.returncode == 1
    assert (
        'Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource '
        '"pods" in API group "" in the namespace "ml"'
    ) in refused.stderr


def test_can_i_list_as_a_service_account_lists_its_rules(admin: Kubectl) -> None:
    done = admin("auth", "can-i", "--list", f"--as={SA_USER}")
    assert done.returncode == 0, done.stderr
    resources = {line.split()[0] for line in done.stdout.splitlines()[1:] if line.strip()}
    assert "nodes" in resources
    assert "*.*" not in resources  # the admin's rules are not the ServiceAccount's


def test_whoami_as_names_the_impersonated_user_and_the_groups_it_gets(admin: Kubectl) -> None:
    # A ServiceAccount without --as-group: its two groups, then system:authenticated.
    assert whoami(admin, f"--as={SA_USER}") == {
        "username": SA_USER,
        "groups": [
            "system:serviceaccounts",
            f"system:serviceaccounts:{NS}",
            "system:authenticated",
        ],
    }
    # A user: system:authenticated alone, or after the groups given.
    assert whoami(admin, "--as=alice") == {"username": "alice", "groups": ["system:authenticated"]}
    assert whoami(
        admin, "--as=alice", "--as-group=oncall", "--as-group=gpu-admins", "--as-uid=u-7"
    ) == {
        "username": "alice",
        "uid": "u-7",
        "groups": ["oncall", "gpu-admins", "system:authenticated"],
    }
    # Not a ServiceAccount's name to SplitUsername (the namespace is no DNS-1123 label): a
    # user of that name, with a user's groups.
    assert whoami(admin, "--as=system:serviceaccount:Ops_Team:gpubot") == {
        "username": "system:serviceaccount:Ops_Team:gpubot",
        "groups": ["system:authenticated"],
    }
    # Groups given are the authority for a ServiceAccount too (no system:serviceaccounts).
    assert whoami(admin, f"--as={SA_USER}", "--as-group=oncall") == {
        "username": SA_USER,
        "groups": ["oncall", "system:authenticated"],
    }


def test_as_anonymous_is_refused_what_anonymous_is_refused(
    cluster: SimulatedApiServer, admin: Kubectl
) -> None:
    """system:anonymous gets system:unauthenticated, not system:authenticated: so not even
    system:basic-user's SelfSubjectReview. kubectl words any 403 of `auth whoami` its own way
    (kubectl/pkg/cmd/auth/whoami.go `notEnabledErr`); the audit log has the 403."""
    done = admin("auth", "whoami", "--as=system:anonymous")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "error: the selfsubjectreviews API is not enabled in the cluster or you do not have "
        "permission to call it"
    )
    [review] = [e for e in cluster.audit() if e.resource == "selfsubjectreviews"]
    assert (review.user, review.impersonated_user, review.code) == (
        "kubernetes-admin",
        "system:anonymous",
        403,
    )


def test_a_service_account_without_impersonate_gets_kube_apiservers_403(
    cluster: SimulatedApiServer, admin: Kubectl, tmp_path: Path
) -> None:
    gpubot = kubectl_as(cluster, tmp_path, (NS, "gpubot"))
    as_user = gpubot("auth", "can-i", "delete", "nodes", "--as=alice")
    assert as_user.returncode == 1
    assert (
        'Error from server (Forbidden): users "alice" is forbidden: User '
        f'"{SA_USER}" cannot impersonate resource "users" in API group "" at the cluster scope'
    ) in as_user.stderr
    as_account = gpubot("get", "nodes", f"--as=system:serviceaccount:{NS}:support")
    assert as_account.returncode == 1
    assert (
        'Error from server (Forbidden): serviceaccounts "support" is forbidden: User '
        f'"{SA_USER}" cannot impersonate resource "serviceaccounts" in API group "" in the '
        f'namespace "{NS}"'
    ) in as_account.stderr
    # Every request of the two was refused at impersonation, as the ServiceAccount's.
    refused = [e for e in cluster.audit() if e.user == SA_USER]
    assert refused and {(e.code, e.impersonated_user) for e in refused} == {(403, "")}


def test_impersonate_is_granted_per_name_and_per_kind(
    cluster: SimulatedApiServer, admin: Kubectl, tmp_path: Path
) -> None:
    support = kubectl_as(cluster, tmp_path, (NS, "support"))
    assert whoami(support, "--as=alice", "--as-group=oncall")["username"] == "alice"
    bob = support("auth", "can-i", "list", "nodes", "--as=bob")
    assert bob.returncode == 1
    assert (
        f'users "bob" is forbidden: User "system:serviceaccount:{NS}:support" cannot '
        'impersonate resource "users" in API group "" at the cluster scope'
    ) in bob.stderr
    admins = support("auth", "can-i", "list", "nodes", "--as=alice", "--as-group=gpu-admins")
    assert admins.returncode == 1
    assert (
        f'groups "gpu-admins" is forbidden: User "system:serviceaccount:{NS}:support" cannot '
        'impersonate resource "groups" in API group "" at the cluster scope'
    ) in admins.stderr
    uid = support("auth", "can-i", "list", "nodes", "--as=alice", "--as-uid=u-7")
    assert uid.returncode == 1
    assert (
        f'uids.authentication.k8s.io "u-7" is forbidden: User "system:serviceaccount:{NS}:'
        'support" cannot impersonate resource "uids" in API group "authentication.k8s.io" at '
        "the cluster scope"
    ) in uid.stderr


def test_the_audit_log_has_who_asked_and_whom_they_acted_as(
    cluster: SimulatedApiServer, admin: Kubectl
) -> None:
    done = admin("auth", "can-i", "delete", "nodes", f"--as={SA_USER}")
    assert done.stdout.strip() == "no", done.stderr
    [review] = [e for e in cluster.audit() if e.resource == "selfsubjectaccessreviews"]
    # kube-apiserver's audit event: `user` the authenticated one, `impersonatedUser` the other.
    assert (review.user, review.impersonated_user, review.code) == (
        "kubernetes-admin",
        SA_USER,
        201,
    )
    assert str(review).startswith(f"kubernetes-admin as {SA_USER}: create ")


def test_groups_without_a_user_are_the_filters_500(cluster: SimulatedApiServer) -> None:
    """kubectl refuses `--as-group` without `--as` itself; a raw client gets what
    `buildImpersonationRequests` fails with, through `responsewriters.InternalError`."""
    http = connection(cluster)
    http.putrequest("GET", "/api/v1/nodes?limit=1")
    http.putheader("Authorization", f"Bearer {cluster.admin_token}")
    http.putheader("Impersonate-Group", "oncall")
    http.putheader("Impersonate-Group", "gpu-admins")
    http.endheaders()
    response = http.getresponse()
    assert response.status == 500
    assert response.read().decode() == (
        'Internal Server Error: "/api/v1/nodes?limit=1": requested [{Group  oncall    } '
        "{Group  gpu-admins    }] without impersonating a user\n"
    )
    http.close()
    assert [(e.user, e.impersonated_user, e.code) for e in cluster.audit()] == [
        ("kubernetes-admin", "", 500)
    ]


def acting_as(
    cluster: SimulatedApiServer, home: Path, service_account: tuple[str, str] | None, **user: object
) -> Kubectl:
    """kubectl whose kubeconfig user impersonates (`as`, `as-groups`, `as-user-extra`: the
    kubeconfig's own fields, which kubectl has no flag for in the extras' case)."""
    path = cluster.write_kubeconfig(home / "kubeconfig-acting", service_account)
    config = yaml.safe_load(path.read_text())
    config["users"][0]["user"].update(user)
    path.write_text(yaml.safe_dump(config))
    return kubectl_for(path, home)


def test_extras_are_impersonated_each_key_and_value(
    cluster: SimulatedApiServer, admin: Kubectl, tmp_path: Path
) -> None:
    extras = {"scopes": ["view", "drain"], "example.com/team": ["gpu"]}
    kubectl = acting_as(cluster, tmp_path, None, **{"as": "alice", "as-user-extra": extras})
    # client-go escapes the key into the header's name; kube-apiserver unescapes it.
    assert whoami(kubectl) == {
        "username": "alice",
        "groups": ["system:authenticated"],
        "extra": extras,
    }
    support = acting_as(
        cluster, tmp_path, (NS, "support"), **{"as": "alice", "as-user-extra": {"scopes": ["view"]}}
    )
    refused = support("auth", "can-i", "list", "nodes")
    assert refused.returncode == 1
    assert (
        f'userextras.authentication.k8s.io "view" is forbidden: User "system:serviceaccount:'
        f'{NS}:support" cannot impersonate resource "userextras/scopes" in API group '
        '"authentication.k8s.io" at the cluster scope'
    ) in refused.stderr
