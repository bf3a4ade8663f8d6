"""Who may do what: kube-apiserver's request attributes and its RBAC authorizer, word for word.

Sources (kubernetes/kubernetes):
- staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go `NewRequestInfo`: a path
  under /api/v1 or /apis/GROUP/VERSION is a resource request (verb from the method: get,
  list or watch for a GET, by name, collection or `watch=true`; create, update, patch,
  delete, deletecollection), namespace, resource, name and subresource from the path; a list
  or watch with `fieldSelector=metadata.name=X` carries X as its name (so `resourceNames`
  rules can allow it); anything else (/api, /apis, /version, /openapi/v3, the simulator's
  /_sim endpoints) is a non-resource request whose verb is the lowercased method.
- plugin/pkg/auth/authorizer/rbac/rbac.go `RuleAllows` and pkg/apis/rbac/v1
  evaluation_helpers.go (`VerbMatches`, `APIGroupMatches`, `ResourceMatches` with `*` and
  `*/subresource`, `ResourceNameMatches`, `NonResourceURLMatches` with a trailing `*`), and
  pkg/registry/rbac/validation/rule.go `VisitRulesFor`: ClusterRoleBindings first, then the
  RoleBindings of the request's namespace; a subject applies by user name, group, or
  ServiceAccount (`system:serviceaccount:NS:NAME`, the binding's namespace when the subject
  names none). The allowed reason is `RBAC: allowed by ClusterRoleBinding "B" of ClusterRole
  "R" to ServiceAccount "NAME/NS"` (the describers in rule.go); a denial has no reason unless a
  binding names a role that does not exist (`RBAC: clusterrole.rbac.authorization.k8s.io "R"
  not found`, aggregated as utilerrors does).
- staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go `Forbidden`
  and `forbiddenMessage`, with apimachinery's `NewForbidden`: the 403 Status body, e.g.
  `nodes "gpu-a1" is forbidden: User "system:serviceaccount:gpubot:gpubot" cannot patch
  resource "nodes" in API group "" at the cluster scope`.
- ClusterRoles with an `aggregationRule` take the rules of every ClusterRole its selectors
  match (the clusterrole-aggregation controller writes them into `rules`; here they are
  gathered when the role is evaluated, so the stored object keeps its own `rules`).

Only RBAC decides: no Node authorizer (kubelets are simulated in-process and never call the
API), no webhook, and `system:masters` is not special (kubeadm's admin is bound to
cluster-admin through RBAC). Pure functions of the RBAC objects they are given and the
compiled `Policy`: nothing here writes or keeps state beyond that compilation.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from bot.kube_objects import labels_of, name_of, namespace_of, selector_matches
from gpusim.objects import Json
from gpusim.resources import ApiError

Rule = Mapping[str, Any]

SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True)
class User:
    """An authenticated (or anonymous) user, as `user.Info` holds it."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: Mapping[str, list[str]] = field(default_factory=dict)

    def as_json(self) -> Json:
        """The `userInfo` of a SelfSubjectReview."""
        body: Json = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            body["uid"] = self.uid
        if self.extra:
            body["extra"] = {k: list(v) for k, v in self.extra.items()}
        return body


AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = User("system:anonymous", (UNAUTHENTICATED,))
"""user.Anonymous: who a request without credentials is."""


def service_account_groups(namespace: str) -> tuple[str, str]:
    """serviceaccount.MakeGroupNames: the groups every ServiceAccount of `namespace` is in."""
    return ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")


def service_account_user(namespace: str, name: str, uid: str) -> User:
    """serviceaccount.UserInfo: the user a ServiceAccount token authenticates (with the
    authenticator's system:authenticated)."""
    return User(
        f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}",
        (*service_account_groups(namespace), AUTHENTICATED),
        uid,
    )


@dataclass(frozen=True)
class Attributes:
    """authorizer.Attributes of one request."""

    user: User
    verb: str
    resource_request: bool
    namespace: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""


_NAMESPACE_SUBRESOURCES = {"status", "finalize"}
_METHOD_VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}


def request_attributes(user: User, method: str, path: str, query: Mapping[str, str]) -> Attributes:
    """What `NewRequestInfo` makes of a request (see the module docstring)."""
    parts = [unquote(p) for p in path.split("/") if p]
    non_resource = Attributes(user, method.lower(), False, path=path)
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return non_resource
    prefix, rest = parts[0], parts[1:]
    group = ""
    if prefix == "apis":
        if len(rest) < 3:
            return non_resource
        group, rest = rest[0], rest[1:]
    version, rest = rest[0], rest[1:]
    verb = _METHOD_VERBS.get(method.upper(), "")
    namespace = ""
    if rest and rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if not name and verb == "get":
        verb = "watch" if query.get("watch") in ("1", "true") else "list"
        name = _exact_name(query.get("fieldSelector", ""))
    if not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(
        user, verb, True, namespace, group, version, resource, subresource, name, path=path
    )


def _exact_name(selector: str) -> str:
    """fields.Selector.RequiresExactMatch("metadata.name") for the simple selectors clients
    send (`metadata.name=X` or `==`, alone or among other terms)."""
    for term in selector.split(","):
        for operator in ("==", "="):
            key, sep, value = term.partition(operator)
            if sep and key.strip() == "metadata.name" and "!" not in key:
                return value.strip()
    return ""


# ---- the RBAC rules -----------------------------------------------------------------------


def _listed(rule: Rule, key: str) -> list[str]:
    return [str(v) for v in rule.get(key) or []]


def rule_allows(attributes: Attributes, rule: Rule) -> bool:
    """rbac.go `RuleAllows`."""
    verbs = _listed(rule, "verbs")
    if "*" not in verbs and attributes.verb not in verbs:
        return False
    if not attributes.resource_request:
        return _non_resource_url_matches(rule, attributes.path)
    groups = _listed(rule, "apiGroups")
    if "*" not in groups and attributes.api_group not in groups:
        return False
    combined = attributes.resource
    if attributes.subresource:
        combined += "/" + attributes.subresource
    if not _resource_matches(_listed(rule, "resources"), combined, attributes.subresource):
        return False
    names = _listed(rule, "resourceNames")
    return not names or attributes.name in names


def _resource_matches(resources: list[str], combined: str, subresource: str) -> bool:
    for resource in resources:
        if resource in ("*", combined):
            return True
        if subresource and resource == "*/" + subresource:
            return True
    return False


def _non_resource_url_matches(rule: Rule, path: str) -> bool:
    for url in _listed(rule, "nonResourceURLs"):
        if url == "*" or url == path:
            return True
        if url.endswith("*") and path.startswith(url[:-1]):
            return True
    return False


# ---- bindings and roles -------------------------------------------------------------------


def _subject_applies(subject: Mapping[str, Any], user: User, binding_namespace: str) -> bool:
    """rule.go `appliesToUser`."""
    kind = subject.get("kind")
    name = str(subject.get("name", ""))
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = str(subject.get("namespace") or binding_namespace)
        return bool(namespace) and user.name == f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"
    return False


def _describe_subject(subject: Mapping[str, Any], binding_namespace: str) -> str:
    kind, name = str(subject.get("kind", "")), str(subject.get("name", ""))
    if kind == "ServiceAccount":
        namespace = str(subject.get("namespace") or binding_namespace)
        return f"{kind} {json.dumps(name + '/' + namespace)}"
    return f"{kind} {json.dumps(name)}"


@dataclass(frozen=True)
class _Grant:
    """One binding's subjects and the rules of the role it names (or why it has none)."""

    binding: Json
    rules: tuple[Rule, ...]
    error: str


class Policy:
    """The RBAC objects of a cluster at one moment, compiled for fast decisions."""

    def __init__(
        self,
        cluster_roles: Iterable[Json],
        cluster_role_bindings: Iterable[Json],
        roles: Iterable[Json],
        role_bindings: Iterable[Json],
    ) -> None:
        by_name = {name_of(r): r for r in cluster_roles}
        self._cluster_rules = {name: _aggregated(role, by_name) for name, role in by_name.items()}
        self._roles = {(namespace_of(r), name_of(r)): tuple(r.get("rules") or []) for r in roles}
        self._cluster_grants = [self._grant(b, "") for b in cluster_role_bindings]
        self._grants: dict[str, list[_Grant]] = {}
        for binding in role_bindings:
            namespace = namespace_of(binding)
            self._grants.setdefault(namespace, []).append(self._grant(binding, namespace))

    def _grant(self, binding: Json, namespace: str) -> _Grant:
        ref = binding.get("roleRef") or {}
        kind, name = str(ref.get("kind", "")), str(ref.get("name", ""))
        if kind == "ClusterRole":
            rules = self._cluster_rules.get(name)
            missing = f'clusterrole.rbac.authorization.k8s.io "{name}" not found'
        else:
            rules = self._roles.get((namespace, name))
            missing = f'role.rbac.authorization.k8s.io "{name}" not found'
        if rules is None:
            return _Grant(binding, (), missing)
        return _Grant(binding, rules, "")

    def _visit(self, user: User, namespace: str) -> Iterable[tuple[str, _Grant]]:
        """(describer, grant) of every binding that applies to `user`, in VisitRulesFor's
        order: cluster role bindings, then the namespace's role bindings."""
        for grant in self._cluster_grants:
            for subject in grant.binding.get("subjects") or []:
                if _subject_applies(subject, user, ""):
                    ref = grant.binding.get("roleRef") or {}
                    yield (
                        f"ClusterRoleBinding {json.dumps(name_of(grant.binding))} of "
                        f"{ref.get('kind')} {json.dumps(ref.get('name'))} to "
                        f"{_describe_subject(subject, '')}",
                        grant,
                    )
                    break
        if not namespace:
            return
        for grant in self._grants.get(namespace, []):
            for subject in grant.binding.get("subjects") or []:
                if _subject_applies(subject, user, namespace):
                    ref = grant.binding.get("roleRef") or {}
                    yield (
                        f"RoleBinding {json.dumps(name_of(grant.binding) + '/' + namespace)} "
                        f"of {ref.get('kind')} {json.dumps(ref.get('name'))} to "
                        f"{_describe_subject(subject, namespace)}",
                        grant,
                    )
                    break

    def authorize(self, attributes: Attributes) -> tuple[bool, str]:
        """(allowed, reason), as rbac.go `Authorize` decides and words it."""
        errors: list[str] = []
        for source, grant in self._visit(attributes.user, attributes.namespace):
            if grant.error:
                errors.append(grant.error)
            for rule in grant.rules:
                if rule_allows(attributes, rule):
                    return True, f"RBAC: allowed by {source}"
        if not errors:
            return False, ""
        aggregate = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        return False, f"RBAC: {aggregate}"

    def rules_for(self, user: User, namespace: str) -> tuple[list[Rule], list[str]]:
        """Every rule that applies to `user` in `namespace`, and the resolution errors
        (rule.go `RulesFor`): what a SelfSubjectRulesReview answers."""
        rules: list[Rule] = []
        errors: list[str] = []
        for _, grant in self._visit(user, namespace):
            rules.extend(grant.rules)
            if grant.error:
                errors.append(grant.error)
        return rules, errors


def _aggregated(role: Json, by_name: Mapping[str, Json]) -> tuple[Rule, ...]:
    rule = role.get("aggregationRule")
    if not rule:
        return tuple(role.get("rules") or [])
    gathered: list[Rule] = []
    for selector in rule.get("clusterRoleSelectors") or []:
        for other_name in sorted(by_name):
            other = by_name[other_name]
            if other is role or other.get("aggregationRule"):
                continue
            if selector_matches(selector, labels_of(other)):
                gathered.extend(r for r in other.get("rules") or [] if r not in gathered)
    return tuple(gathered)


# ---- the 403 --------------------------------------------------------------------------------


def forbidden_message(attributes: Attributes) -> str:
    """responsewriters.forbiddenMessage."""
    user = json.dumps(attributes.user.name)
    if not attributes.resource_request:
        return f"User {user} cannot {attributes.verb} path {json.dumps(attributes.path)}"
    resource = attributes.resource
    if attributes.subresource:
        resource += "/" + attributes.subresource
    where = (
        f"in the namespace {json.dumps(attributes.namespace)}"
        if attributes.namespace
        else "at the cluster scope"
    )
    return (
        f"User {user} cannot {attributes.verb} resource {json.dumps(resource)} in API group "
        f"{json.dumps(attributes.api_group)} {where}"
    )


def forbidden(attributes: Attributes, reason: str) -> ApiError:
    """responsewriters.Forbidden: the Status kube-apiserver answers a refused request with."""
    message = sanitized(forbidden_message(attributes))
    if reason:
        message = f"{message}: {reason}"
    group, resource, name = attributes.api_group, attributes.resource, attributes.name
    if not resource:
        text = f"forbidden: {message}"
    else:
        qualified = f"{resource}.{group}" if group else resource
        text = (
            f"{qualified} {json.dumps(name)} is forbidden: {message}"
            if name
            else f"{qualified} is forbidden: {message}"
        )
    details: Json = {"kind": resource} if resource else {}
    if group:
        details["group"] = group
    if name:
        details["name"] = name
    return ApiError(403, "Forbidden", text, details)


def sanitized(text: str) -> str:
    """responsewriters' `sanitizer`: `&`, `<` and `>` as HTML entities, in every message
    that echoes what a client sent."""
    for raw, escaped in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;")):
        text = text.replace(raw, escaped)
    return text
