"""Server-side printers of the access kinds: ServiceAccount, Role, ClusterRole and the two
bindings, as printers.go prints them (a binding's subjects as rbac.SubjectsStrings splits
them).

They let `kubectl get sa,roles,rolebindings` against the simulator read as against a real
cluster when a test or a person checks gpubot's RBAC. Pure functions of the object and the
time: they must never read the cluster.
"""

from __future__ import annotations

from datetime import datetime

from bot.kube_objects import meta, name_of
from gpusim.objects import Json
from gpusim.table_cells import (
    AGE,
    CREATED_AT_COLUMNS,
    NAME,
    Cell,
    Printer,
    column,
    created_at_row,
    since,
)

_SERVICE_ACCOUNT_COLUMNS = [
    NAME,
    column(
        "Secrets",
        "Secrets is a list of the secrets in the same namespace that pods "
        "running using this ServiceAccount are allowed to use.",
        "integer",
    ),
    AGE,
]


def _service_account(account: Json, now: datetime) -> list[Cell]:
    return [
        name_of(account),
        len(account.get("secrets") or []),
        since(meta(account).get("creationTimestamp"), now),
    ]


def _binding_columns(kind: str) -> list[Json]:
    return [
        NAME,
        column(
            "Role",
            "RoleRef can reference a Role in the current namespace or a ClusterRole "
            "in the global namespace.",
        ),
        AGE,
        column("Users", f"Users in the {kind}", priority=1),
        column("Groups", f"Groups in the {kind}", priority=1),
        column("ServiceAccounts", f"ServiceAccounts in the {kind}", priority=1),
    ]


def _binding(binding: Json, now: datetime) -> list[Cell]:
    """printRoleBinding / printClusterRoleBinding with rbac.SubjectsStrings."""
    ref = binding.get("roleRef") or {}
    users, groups, accounts = [], [], []
    for subject in binding.get("subjects") or []:
        kind, name = subject.get("kind"), str(subject.get("name", ""))
        if kind == "User":
            users.append(name)
        elif kind == "Group":
            groups.append(name)
        elif kind == "ServiceAccount":
            accounts.append(f"{subject.get('namespace', '')}/{name}")
    return [
        name_of(binding),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        since(meta(binding).get("creationTimestamp"), now),
        ", ".join(users),
        ", ".join(groups),
        ", ".join(accounts),
    ]


PRINTERS: dict[str, Printer] = {
    "ServiceAccount": (_SERVICE_ACCOUNT_COLUMNS, _service_account),
    "ClusterRole": (CREATED_AT_COLUMNS, created_at_row),
    "Role": (CREATED_AT_COLUMNS, created_at_row),
    "ClusterRoleBinding": (_binding_columns("clusterRoleBinding"), _binding),
    "RoleBinding": (_binding_columns("roleBinding"), _binding),
}
