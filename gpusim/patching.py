"""The three PATCH bodies the API server accepts for built-in types, as kubectl sends them.

- `application/merge-patch+json`: RFC 7386.
- `application/strategic-merge-patch+json`: merge patch, except that lists whose items have a
  patch merge key in the Kubernetes types (containers by `name`, conditions by `type`, ...)
  merge item by item, `$patch: delete` removes an item, and `metadata.finalizers` merges as a
  set, as apimachinery's strategicpatch does for the fields gpubot and kubectl touch.
- `application/json-patch+json`: RFC 6902.
Malformed patches raise PatchError, which the server answers with 400/422 Status bodies. Pure
functions: they must never change the document they are given (they return a new one).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from bot.kube_objects import merge_patch

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"

# (field name -> merge key) for the list fields of core/apps/policy types we serve.
_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "env": "name",
    "ports": "containerPort",
    "conditions": "type",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "ownerReferences": "uid",
    "addresses": "type",
    "tolerations": None,  # atomic in the API: replaced whole
    "taints": None,
}
_SET_LISTS = {"finalizers"}


class PatchError(ValueError):
    """A patch the API server refuses (400/422); str() is its message."""


def strategic_merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    if not isinstance(target, Mapping):
        target = {}
    result = dict(target)
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in _SET_LISTS:
            current = list(result.get(key) or [])
            result[key] = current + [v for v in value if v not in current]
        elif isinstance(value, list) and _MERGE_KEYS.get(key):
            result[key] = _merge_list(result.get(key) or [], value, str(_MERGE_KEYS[key]))
        elif isinstance(value, Mapping):
            result[key] = strategic_merge(result.get(key), value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _merge_list(current: list[Any], patch: list[Any], key: str) -> list[Any]:
    merged = [copy.deepcopy(item) for item in current]
    for item in patch:
        if not isinstance(item, Mapping) or key not in item:
            raise PatchError(f"map: {item!r} does not contain declared merge key: {key}")
        index = next(
            (
                i
                for i, old in enumerate(merged)
                if isinstance(old, Mapping) and old.get(key) == item[key]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                merged.pop(index)
        elif index is None:
            merged.append({k: v for k, v in item.items() if not k.startswith("$")})
        else:
            merged[index] = strategic_merge(merged[index], item)
    return merged


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> tuple[Any, str]:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise PatchError(f"doc is missing path: {path}")
    return node, parts[-1]


def _get(doc: Any, path: str) -> Any:
    node = doc
    for part in _pointer(path):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise PatchError(f"doc is missing path: {path}")
    return node


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return copy.deepcopy(value)
    parent, last = _parent(doc, parts, path)
    if isinstance(parent, dict):
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        if last == "-":
            parent.append(copy.deepcopy(value))
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), copy.deepcopy(value))
        else:
            raise PatchError(f"unable to add at index {last} of {path}")
    else:
        raise PatchError(f"doc is missing path: {path}")
    return doc


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        raise PatchError("cannot remove the whole document")
    parent, last = _parent(doc, parts, path)
    if isinstance(parent, dict) and last in parent:
        del parent[last]
    elif isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        parent.pop(int(last))
    else:
        raise PatchError(f"unable to remove nonexistent key: {last}: missing value")
    return doc


def json_patch(doc: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    result = copy.deepcopy(doc)
    for operation in operations:
        if not isinstance(operation, Mapping) or "op" not in operation or "path" not in operation:
            raise PatchError(f"invalid JSON patch operation {operation!r}")
        op, path = operation["op"], str(operation["path"])
        if op == "add":
            result = _add(result, path, operation.get("value"))
        elif op == "remove":
            result = _remove(result, path)
        elif op == "replace":
            _get(result, path)
            result = _add(_remove(result, path), path, operation.get("value"))
        elif op == "test":
            if _get(result, path) != operation.get("value"):
                raise PatchError(f"testing value {path} failed")
        elif op in ("move", "copy"):
            source = str(operation.get("from", ""))
            value = copy.deepcopy(_get(result, source))
            if op == "move":
                result = _remove(result, source)
            result = _add(result, path, value)
        else:
            raise PatchError(f"unexpected kind of JSON patch operation: {op}")
    return result


def apply_patch(content_type: str, current: Mapping[str, Any], body: Any) -> dict[str, Any]:
    kind = content_type.split(";")[0].strip()
    if kind == MERGE_PATCH:
        if not isinstance(body, Mapping):
            raise PatchError("a merge patch must be a JSON object")
        result = merge_patch(current, body)
    elif kind == STRATEGIC_PATCH:
        if not isinstance(body, Mapping):
            raise PatchError("a strategic merge patch must be a JSON object")
        result = strategic_merge(current, body)
    elif kind == JSON_PATCH:
        result = json_patch(current, body)
    else:
        raise LookupError(kind)
    if not isinstance(result, dict):
        raise PatchError("the patch did not produce an object")
    return result
