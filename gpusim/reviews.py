"""The access reviews of authorization.k8s.io/v1 and authentication.k8s.io/v1's
SelfSubjectReview: what `kubectl auth can-i` (`--list`) and `kubectl auth whoami` ask.

Sources (kubernetes/kubernetes): pkg/registry/authorization/selfsubjectaccessreview,
subjectaccessreview, localsubjectaccessreview and selfsubjectrulesreview `rest.go`,
pkg/apis/authorization/validation (the 422s), pkg/registry/authorization/util
(`ResourceAttributesFrom`, `NonResourceAttributesFrom`), and
pkg/registry/authentication/selfsubjectreview. A review is answered and never stored: the
answer is the request with `status` filled in (`allowed`, and the authorizer's `reason`); a
rules review lists the rules of every binding that applies in its namespace, as
ResourceRules and NonResourceRules, `incomplete` when a binding names a role that does not
exist.

Pure functions of the request, the requesting user and the compiled policy: nothing here
writes.
"""

from __future__ import annotations

import copy
from typing import Any

from gpusim.authorization import Attributes, Policy, User
from gpusim.objects import Json
from gpusim.resources import ApiError


def _invalid(kind: str, field: str, value: str, detail: str) -> ApiError:
    message = (
        f'{kind}.authorization.k8s.io "" is invalid: {field}: Invalid value: {value}: {detail}'
    )
    return ApiError(
        422,
        "Invalid",
        message,
        {
            "group": "authorization.k8s.io",
            "kind": kind,
            "causes": [
                {
                    "reason": "FieldValueInvalid",
                    "message": f"Invalid value: {value}: {detail}",
                    "field": field,
                }
            ],
        },
    )


def _attributes(kind: str, user: User, spec: Json) -> Attributes:
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if bool(resource) == bool(non_resource):
        raise _invalid(
            kind,
            "spec.resourceAttributes",
            '"null"' if not resource else "{...}",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )
    if non_resource:
        return Attributes(
            user,
            str(non_resource.get("verb", "")),
            False,
            path=str(non_resource.get("path", "")),
        )
    assert isinstance(resource, dict)
    return Attributes(
        user,
        str(resource.get("verb", "")),
        True,
        namespace=str(resource.get("namespace", "")),
        api_group=str(resource.get("group", "")),
        api_version=str(resource.get("version", "")),
        resource=str(resource.get("resource", "")),
        subresource=str(resource.get("subresource", "")),
        name=str(resource.get("name", "")),
    )


def _answer(kind: str, body: Json, allowed: bool, reason: str) -> Json:
    answer = copy.deepcopy(body)
    answer["kind"] = kind
    answer["apiVersion"] = "authorization.k8s.io/v1"
    answer.setdefault("metadata", {})
    status: Json = {"allowed": allowed}
    if reason:
        status["reason"] = reason
    answer["status"] = status
    return answer


def access_review(
    kind: str, body: Any, requester: User, policy: Policy, namespace: str = ""
) -> Json:
    """A SelfSubjectAccessReview (for `requester`), SubjectAccessReview or
    LocalSubjectAccessReview (for the user the spec names) answered."""
    if not isinstance(body, dict):
        raise ApiError(400, "BadRequest", f"the body of the request was not a {kind} object")
    spec = body.get("spec") or {}
    if kind == "SelfSubjectAccessReview":
        user = requester
    else:
        if not spec.get("user") and not spec.get("groups"):
            raise _invalid(
                kind, "spec.user", '""', "at least one of user or group must be specified"
            )
        user = User(
            str(spec.get("user", "")),
            tuple(str(g) for g in spec.get("groups") or []),
            str(spec.get("uid", "")),
            {str(k): list(v) for k, v in (spec.get("extra") or {}).items()},
        )
    attributes = _attributes(kind, user, spec)
    if kind == "LocalSubjectAccessReview" and attributes.namespace != namespace:
        raise ApiError(
            400,
            "BadRequest",
            f"spec.resourceAttributes.namespace must match namespace: {namespace}",
        )
    allowed, reason = policy.authorize(attributes)
    return _answer(kind, body, allowed, reason)


def rules_review(body: Any, requester: User, policy: Policy) -> Json:
    """A SelfSubjectRulesReview answered for `requester`."""
    if not isinstance(body, dict):
        raise ApiError(
            400, "BadRequest", "the body of the request was not a SelfSubjectRulesReview"
        )
    namespace = str((body.get("spec") or {}).get("namespace", ""))
    rules, errors = policy.rules_for(requester, namespace)
    resource_rules: list[Json] = []
    non_resource_rules: list[Json] = []
    for rule in rules:
        if rule.get("resources"):
            entry: Json = {"verbs": list(rule.get("verbs") or [])}
            for key in ("apiGroups", "resources", "resourceNames"):
                if rule.get(key):
                    entry[key] = list(rule[key])
            resource_rules.append(entry)
        if rule.get("nonResourceURLs"):
            non_resource_rules.append(
                {
                    "verbs": list(rule.get("verbs") or []),
                    "nonResourceURLs": list(rule["nonResourceURLs"]),
                }
            )
    status: Json = {
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": bool(errors),
    }
    if errors:
        status["evaluationError"] = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return {
        "kind": "SelfSubjectRulesReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {},
        "spec": {"namespace": namespace} if namespace else {},
        "status": status,
    }


def self_subject_review(requester: User) -> Json:
    """authentication.k8s.io/v1 SelfSubjectReview: `kubectl auth whoami`."""
    return {
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {},
        "status": {"userInfo": requester.as_json()},
    }
