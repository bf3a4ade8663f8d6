"""Field selectors as the Kubernetes API server parses and applies them.

`parse_field_selector` follows `fields.ParseSelector` (k8s.io/apimachinery pkg/fields/
selector.go): terms split at unescaped commas and sorted, each split at the first `!=`, `==` or
`=`, the value unescaped (`\\,` `\\=` `\\\\`), and then the field label converted the way the
API server's scheme does (pkg/apis/core/v1/conversion.go): kinds with their own conversion
function reject other labels with `field label not supported: X`, every other kind takes only
`metadata.name` and `metadata.namespace` and rejects the rest with
runtime.DefaultMetaV1FieldSelectorConversion's message. Matching reads the field set the
registry builds for the kind (`ToSelectableFields` in pkg/registry/core/*/strategy.go) from the
object as `kubectl get -o json` prints it. It must never match a field the real registry does
not expose for that kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gpusim.validation import SelectorError, go_quote

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "SelectorError",
    "parse_field_selector",
    "selectable_fields",
]

# --------------------------------------------------------------------------------------------
# Field selectors

_FieldOp = Literal["=", "!="]


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """`field=value` (also written `==`) or `field!=value`, after field label conversion."""

    field: str
    operator: _FieldOp
    value: str

    def matches(self, fields: Mapping[str, str]) -> bool:
        have = fields.get(self.field, "")
        return have == self.value if self.operator == "=" else have != self.value

    def __str__(self) -> str:
        return f"{self.field}{self.operator}{_escape_field_value(self.value)}"


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """An AND of field requirements for one resource (plural name, core group)."""

    resource: str
    requirements: tuple[FieldRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        """True when the selector selects everything."""
        return not self.requirements

    def matches(self, obj: Mapping[str, Any]) -> bool:
        if not self.requirements:
            return True
        fields = selectable_fields(obj, self.resource)
        return all(r.matches(fields) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def _escape_field_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _unescape_field_value(value: str) -> str:
    """fields.UnescapeValue."""
    if not any(c in value for c in "\\,="):
        return value
    out: list[str] = []
    in_slash = False
    for c in value:
        if in_slash:
            if c not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{c}")
            out.append(c)
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c in ",=":
            # Go prints the rune with %v: its code point in decimal.
            raise SelectorError(f"invalid field selector: unescaped character in value: {ord(c)}")
        else:
            out.append(c)
    if in_slash:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(text: str) -> list[str]:
    """fields.splitTerms: split at commas not escaped by a backslash (escapes kept)."""
    if not text:
        return []
    terms: list[str] = []
    start = 0
    in_slash = False
    for i, c in enumerate(text):
        if in_slash:
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """fields.splitTerm: the first `!=`, `==` or `=` (tried in that order at each position)."""
    for i in range(len(term)):
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


_ObjectFields = Callable[[Mapping[str, Any]], dict[str, str]]


def _get(obj: Mapping[str, Any], *path: str) -> Any:
    node: Any = obj
    for part in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def _text(value: Any) -> str:
    """A JSON scalar as the field set holds it: Go's zero value for a missing field."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _meta_fields(obj: Mapping[str, Any], namespaced: bool) -> dict[str, str]:
    fields = {"metadata.name": _text(_get(obj, "metadata", "name"))}
    if namespaced:
        fields["metadata.namespace"] = _text(_get(obj, "metadata", "namespace"))
    return fields


def _pod_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    # Internal PodStatus keeps only podIPs; the v1 -> internal conversion makes podIP
    # authoritative when set and falls back to podIPs[0] otherwise.
    pod_ip = _text(_get(obj, "status", "podIP"))
    pod_ips = _get(obj, "status", "podIPs")
    if not pod_ip and isinstance(pod_ips, list) and pod_ips and isinstance(pod_ips[0], Mapping):
        pod_ip = _text(pod_ips[0].get("ip"))
    return {
        "spec.nodeName": _text(_get(obj, "spec", "nodeName")),
        "spec.restartPolicy": _text(_get(obj, "spec", "restartPolicy")),
        "spec.schedulerName": _text(_get(obj, "spec", "schedulerName")),
        "spec.serviceAccountName": _text(_get(obj, "spec", "serviceAccountName")),
        "spec.hostNetwork": _text(bool(_get(obj, "spec", "hostNetwork"))),
        "status.phase": _text(_get(obj, "status", "phase")),
        "status.podIP": pod_ip,
        "status.nominatedNodeName": _text(_get(obj, "status", "nominatedNodeName")),
        **_meta_fields(obj, namespaced=True),
    }


def _node_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    return {
        **_meta_fields(obj, namespaced=False),
        "spec.unschedulable": _text(bool(_get(obj, "spec", "unschedulable"))),
    }


def _event_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    # JSON `reportingComponent` is the internal ReportingController; `source` falls back to it.
    reporting = _text(obj.get("reportingComponent"))
    source = _text(_get(obj, "source", "component")) or reporting
    involved = {
        f"involvedObject.{name}": _text(_get(obj, "involvedObject", name))
        for name in (
            "kind",
            "namespace",
            "name",
            "uid",
            "apiVersion",
            "resourceVersion",
            "fieldPath",
        )
    }
    return {
        **involved,
        "reason": _text(obj.get("reason")),
        "reportingComponent": reporting,
        "source": source,
        "type": _text(obj.get("type")),
        **_meta_fields(obj, namespaced=True),
    }


def _namespace_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    return {
        **_meta_fields(obj, namespaced=False),
        "status.phase": _text(_get(obj, "status", "phase")),
        "name": _text(_get(obj, "metadata", "name")),  # kept by the server for compatibility
    }


def _secret_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    return {**_meta_fields(obj, namespaced=True), "type": _text(obj.get("type"))}


def _service_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    return {
        **_meta_fields(obj, namespaced=True),
        "spec.clusterIP": _text(_get(obj, "spec", "clusterIP")),
        "spec.type": _text(_get(obj, "spec", "type")),
    }


def _replication_controller_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    replicas = _get(obj, "status", "replicas")
    return {**_meta_fields(obj, namespaced=True), "status.replicas": _text(replicas or 0)}


def _default_fields(obj: Mapping[str, Any]) -> dict[str, str]:
    # A cluster-scoped object has no namespace: "" either way, as on the server.
    return _meta_fields(obj, namespaced=True)


@dataclass(frozen=True, slots=True)
class _Kind:
    """A kind's field labels, its field set and the old names it still accepts."""

    labels: frozenset[str]  # field labels the kind's conversion function accepts
    fields: _ObjectFields
    aliases: Mapping[str, str]


# The core/v1 kinds with their own field label conversion function (conversion.go).
_KINDS: dict[str, _Kind] = {
    "pods": _Kind(
        frozenset(
            {
                "metadata.name",
                "metadata.namespace",
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.podIPs",  # accepted, but not in the field set: always ""
                "status.nominatedNodeName",
            }
        ),
        _pod_fields,
        {"spec.host": "spec.nodeName"},  # for old v1 clients
    ),
    "nodes": _Kind(frozenset({"metadata.name", "spec.unschedulable"}), _node_fields, {}),
    "events": _Kind(
        frozenset(
            {
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
                "metadata.namespace",
                "metadata.name",
            }
        ),
        _event_fields,
        {},
    ),
    "namespaces": _Kind(frozenset({"status.phase", "metadata.name"}), _namespace_fields, {}),
    "secrets": _Kind(
        frozenset({"type", "metadata.namespace", "metadata.name"}), _secret_fields, {}
    ),
    "services": _Kind(
        frozenset({"metadata.namespace", "metadata.name", "spec.clusterIP", "spec.type"}),
        _service_fields,
        {},
    ),
    "replicationcontrollers": _Kind(
        frozenset({"metadata.name", "metadata.namespace", "status.replicas"}),
        _replication_controller_fields,
        {},
    ),
}


def _convert_field_label(resource: str, label: str) -> str:
    kind = _KINDS.get(resource)
    if kind is None:  # runtime.DefaultMetaV1FieldSelectorConversion
        if label in ("metadata.name", "metadata.namespace"):
            return label
        raise SelectorError(
            f"{go_quote(label)} is not a known field selector: only "
            '"metadata.name", "metadata.namespace"'
        )
    if label in kind.labels:
        return label
    if label in kind.aliases:
        return kind.aliases[label]
    raise SelectorError(f"field label not supported: {label}")


def selectable_fields(obj: Mapping[str, Any], resource: str) -> dict[str, str]:
    """The field set the API server matches field selectors against, for `resource`."""
    kind = _KINDS.get(resource)
    return (kind.fields if kind else _default_fields)(obj)


def parse_field_selector(text: str, resource: str) -> FieldSelector:
    """Parse a `fieldSelector` query parameter for `resource` (plural, e.g. "pods").

    fields.ParseSelector first (every term, in sorted order), then the scheme's field label
    conversion for the resource's kind; the first failure raises SelectorError with the API
    server's message. The empty string selects everything.
    """
    terms: list[tuple[str, _FieldOp, str]] = []
    for part in sorted(_split_terms(text)):
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        lhs, op, rhs = split
        terms.append((lhs, "!=" if op == "!=" else "=", _unescape_field_value(rhs)))
    requirements = tuple(
        FieldRequirement(_convert_field_label(resource, field), op, value)
        for field, op, value in terms
    )
    return FieldSelector(resource, requirements)
