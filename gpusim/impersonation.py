"""Acting as someone else: what kube-apiserver's impersonation filter makes of a request's
`Impersonate-*` headers, so that `kubectl --as`, `--as-group` and `--as-uid` get the answer
the impersonated user would, and only a caller RBAC lets `impersonate` gets it.

Without it, `kubectl auth can-i delete nodes --as=system:serviceaccount:gpubot:gpubot` is
answered for the admin who asked (yes), and an operator checking the chart's RBAC the way
the Kubernetes docs show is told the wrong thing.

Sources (kubernetes/kubernetes, staging/src/k8s.io/apiserver/pkg):
- endpoints/filters/impersonation.go `buildImpersonationRequests`: `Impersonate-User` (the
  first value) is a ServiceAccount when `serviceaccount.SplitUsername` takes it, a user
  otherwise; each `Impersonate-Group` value a group; each value of an
  `Impersonate-Extra-KEY` header an extra (KEY lowercased, then path-unescaped);
  `Impersonate-Uid` a uid. Groups, extras or a uid without a user are an error, which the
  filter answers with `responsewriters.InternalError`: a plain-text 500, not a Status.
- the same file's `WithImpersonation`: each of those is authorized for the caller as verb
  `impersonate` on `serviceaccounts` (namespaced, apiGroup ""), `users` or `groups`
  (apiGroup ""), `userextras/KEY` or `uids` (apiGroup authentication.k8s.io), named by the
  value; the first refused is the 403 `responsewriters.Forbidden` writes for those
  attributes. The user it results in: the groups given are the authority; without them a
  ServiceAccount gets `system:serviceaccounts` and `system:serviceaccounts:NS`; then
  `system:authenticated` is added unless the groups already hold it or
  `system:unauthenticated`, and `system:anonymous` gets `system:unauthenticated` instead.
- authentication/serviceaccount/util.go `SplitUsername` (`system:serviceaccount:NS:NAME`,
  NS a DNS-1123 label, NAME a DNS-1123 subdomain) and `MakeGroupNames`.

The constrained impersonation of KEP-5284 (alpha, off by default) is not here. Pure
functions of the headers and the caller: it never authorizes (`gpusim.access_control` asks
the policy with the attributes made here) and never writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from gpusim.authorization import (
    ANONYMOUS,
    AUTHENTICATED,
    SERVICE_ACCOUNT_PREFIX,
    UNAUTHENTICATED,
    Attributes,
    User,
    sanitized,
    service_account_groups,
)
from gpusim.validation import go_quote, is_dns1123_label, is_dns1123_subdomain

USER_HEADER = "impersonate-user"
GROUP_HEADER = "impersonate-group"
UID_HEADER = "impersonate-uid"
EXTRA_PREFIX = "impersonate-extra-"
"""authenticationv1's header names, lowercased: HTTP header names are case-insensitive."""
AUTHENTICATION_V1 = "authentication.k8s.io/v1"
"""The apiVersion of the UserExtra and UID references: their group is the attributes'."""


@dataclass(frozen=True)
class _Wanted:
    """One of `buildImpersonationRequests`' ObjectReferences: who or what the caller asks
    to act as. `field_path` holds an extra's key, as the original does."""

    kind: str
    name: str
    namespace: str = ""
    api_version: str = ""
    field_path: str = ""

    def __str__(self) -> str:
        """Go's %v of the v1.ObjectReference: its seven fields, space-separated."""
        fields = (self.kind, self.namespace, self.name, "", self.api_version, "", self.field_path)
        return "{" + " ".join(fields) + "}"

    def attributes(self, caller: User) -> Attributes:
        """What `caller` must be allowed to impersonate this (`actingAsAttributes`)."""
        group, _, version = self.api_version.rpartition("/")
        resource, subresource = {
            "ServiceAccount": ("serviceaccounts", ""),
            "User": ("users", ""),
            "Group": ("groups", ""),
            "UserExtra": ("userextras", self.field_path),
            "UID": ("uids", ""),
        }[self.kind]
        return Attributes(
            caller,
            "impersonate",
            True,
            namespace=self.namespace,
            api_group=group,
            api_version=version,
            resource=resource,
            subresource=subresource,
            name=self.name,
        )


class HeadersError(Exception):
    """Impersonation headers the filter cannot make a user of (groups, extras or a uid
    without a user). kube-apiserver answers them with `responsewriters.InternalError`."""

    def response(self, request_uri: str) -> str:
        """The plain-text body of that 500 (http.Error adds the newline)."""
        return sanitized(f"Internal Server Error: {go_quote(request_uri)}: {self}") + "\n"


@dataclass(frozen=True)
class Impersonation:
    """What a request's headers ask: the permissions the caller needs, in the filter's
    order (the first refused is the 403), and the user the request then acts as."""

    checks: tuple[Attributes, ...]
    user: User


def _split_service_account(name: str) -> tuple[str, str] | None:
    """serviceaccount.SplitUsername: (namespace, name), or None for any other user name."""
    if not name.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    parts = name[len(SERVICE_ACCOUNT_PREFIX) :].split(":")
    if len(parts) != 2 or not is_dns1123_label(parts[0]) or not is_dns1123_subdomain(parts[1]):
        return None
    return parts[0], parts[1]


def _wanted(headers: Sequence[tuple[str, str]]) -> list[_Wanted]:
    """`buildImpersonationRequests` over the request's header lines, in the order sent."""
    values: dict[str, list[str]] = {}
    extras: list[_Wanted] = []
    for raw_name, value in headers:
        name = raw_name.lower()
        values.setdefault(name, []).append(value)
        if name.startswith(EXTRA_PREFIX):
            key = unquote(name[len(EXTRA_PREFIX) :])
            extras.append(_Wanted("UserExtra", value, "", AUTHENTICATION_V1, key))
    wanted: list[_Wanted] = []
    user = (values.get(USER_HEADER) or [""])[0]
    if user:
        account = _split_service_account(user)
        if account is not None:
            wanted.append(_Wanted("ServiceAccount", account[1], account[0]))
        else:
            wanted.append(_Wanted("User", user))
    groups = [_Wanted("Group", group) for group in values.get(GROUP_HEADER, [])]
    uid = (values.get(UID_HEADER) or [""])[0]
    uids = [_Wanted("UID", uid, "", AUTHENTICATION_V1)] if uid else []
    wanted += groups + extras + uids
    if (groups or extras or uids) and not user:
        raise HeadersError(f"requested [{' '.join(map(str, wanted))}] without impersonating a user")
    return wanted


def impersonation(caller: User, headers: Sequence[tuple[str, str]]) -> Impersonation | None:
    """What the headers ask of `caller`, or None when they ask nothing (the request is the
    caller's own). HeadersError for groups, extras or a uid without a user."""
    wanted = _wanted(headers)
    if not wanted:
        return None
    groups_given = any(w.kind == "Group" for w in wanted)
    name, uid = "", ""
    groups: list[str] = []
    extra: dict[str, list[str]] = {}
    for each in wanted:
        if each.kind == "ServiceAccount":
            name = f"{SERVICE_ACCOUNT_PREFIX}{each.namespace}:{each.name}"
            if not groups_given:
                groups = list(service_account_groups(each.namespace))
        elif each.kind == "User":
            name = each.name
        elif each.kind == "Group":
            groups.append(each.name)
        elif each.kind == "UserExtra":
            extra.setdefault(each.field_path, []).append(each.name)
        else:
            uid = each.name
    if name == ANONYMOUS.name:
        if UNAUTHENTICATED not in groups:
            groups.append(UNAUTHENTICATED)
    elif AUTHENTICATED not in groups and UNAUTHENTICATED not in groups:
        groups.append(AUTHENTICATED)
    return Impersonation(
        tuple(each.attributes(caller) for each in wanted), User(name, tuple(groups), uid, extra)
    )
