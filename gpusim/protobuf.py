"""The little of Kubernetes' protobuf encoding the simulator must read: the access reviews
kubectl sends as `application/vnd.kubernetes.protobuf`.

kubectl's typed clients post built-in kinds as protobuf (and accept JSON back, which is what
the simulator answers). The body is the envelope of
k8s.io/apimachinery/pkg/runtime/serializer/protobuf: the magic `k8s\\x00`, then a
`runtime.Unknown` (1: TypeMeta {1: apiVersion, 2: kind}, 2: raw, the object's own message).
The messages and their field numbers are k8s.io/api/authorization/v1/generated.proto's
(SelfSubjectAccessReview, SubjectAccessReview, LocalSubjectAccessReview,
SelfSubjectRulesReview, ResourceAttributes, NonResourceAttributes) and
k8s.io/api/authentication/v1's SelfSubjectReview. Decoded to the JSON the same object has;
fields the simulator does not read (metadata, field and label selector attributes) are
skipped. Pure functions: bytes in, JSON out; they must never accept what is not the envelope.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from gpusim.objects import Json

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"


class ProtobufError(ValueError):
    """Not a Kubernetes protobuf envelope, or not a message of the kind it names."""


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise ProtobufError("varint too long")


def _fields(data: bytes) -> Iterator[tuple[int, int, bytes | int]]:
    """(field number, wire type, value) of each field: bytes for length-delimited fields,
    int for varints; fixed-width fields are skipped over."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
            yield number, wire, value
        elif wire == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise ProtobufError("truncated field")
            yield number, wire, data[at : at + size]
            at += size
        elif wire == 1:
            at += 8
        elif wire == 5:
            at += 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")


def _strings(data: bytes, names: dict[int, str]) -> Json:
    found: Json = {}
    for number, wire, value in _fields(data):
        if number in names and wire == 2 and isinstance(value, bytes):
            found[names[number]] = value.decode()
    return found


_RESOURCE_ATTRIBUTES = {
    1: "namespace",
    2: "verb",
    3: "group",
    4: "version",
    5: "resource",
    6: "subresource",
    7: "name",
}
_NON_RESOURCE_ATTRIBUTES = {1: "path", 2: "verb"}


def _access_review_spec(data: bytes) -> Json:
    spec: Json = {}
    groups: list[str] = []
    for number, wire, value in _fields(data):
        if wire != 2 or not isinstance(value, bytes):
            continue
        if number == 1:
            spec["resourceAttributes"] = _strings(value, _RESOURCE_ATTRIBUTES)
        elif number == 2:
            spec["nonResourceAttributes"] = _strings(value, _NON_RESOURCE_ATTRIBUTES)
        elif number == 3:
            spec["user"] = value.decode()
        elif number == 4:
            groups.append(value.decode())
        elif number == 6:
            spec["uid"] = value.decode()
    if groups:
        spec["groups"] = groups
    return spec


def _rules_review_spec(data: bytes) -> Json:
    return _strings(data, {1: "namespace"})


_SPECS: dict[str, Callable[[bytes], Json]] = {
    "SelfSubjectAccessReview": _access_review_spec,
    "SubjectAccessReview": _access_review_spec,
    "LocalSubjectAccessReview": _access_review_spec,
    "SelfSubjectRulesReview": _rules_review_spec,
    "SelfSubjectReview": lambda _data: {},
}


def decode(body: bytes) -> Json:
    """The JSON of a protobuf-encoded review (see the module docstring)."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic number")
    type_meta: Json = {}
    raw = b""
    for number, wire, value in _fields(body[len(MAGIC) :]):
        if number == 1 and wire == 2 and isinstance(value, bytes):
            type_meta = _strings(value, {1: "apiVersion", 2: "kind"})
        elif number == 2 and wire == 2 and isinstance(value, bytes):
            raw = value
    kind = str(type_meta.get("kind", ""))
    spec_of = _SPECS.get(kind)
    if spec_of is None:
        raise ProtobufError(f"the simulator reads no protobuf {kind or 'object'}")
    obj: Json = {**type_meta, "metadata": {}, "spec": {}}
    for number, wire, value in _fields(raw):
        if number == 2 and wire == 2 and isinstance(value, bytes):
            obj["spec"] = spec_of(value)
    return obj
