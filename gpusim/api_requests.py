"""One request to the simulated API server, read as kube-apiserver reads it: the path split
into group, version, namespace, resource, name and subresource; the query; the body in the
content type the client sent (JSON, or the protobuf kubectl uses for access reviews).

It exists so that every handler reads a request the same way and a malformed body is the
same 400 or 415 whoever reads it. It must never decide what a request does (the handlers
do) nor answer it.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from gpusim import protobuf
from gpusim.authorization import ANONYMOUS
from gpusim.objects import Json
from gpusim.resources import BY_PLURAL, ApiError, ResourceType

NOT_FOUND = "the server could not find the requested resource"
"""The message of the 404 kube-apiserver answers for a path it does not serve."""


class ApiRequest:
    """One HTTP request, its body read at once. It owns that body and the user the request
    is (the one authenticated, or the one it impersonates); it must never keep the
    connection's stream (a kept-alive connection must not hold a body unread)."""

    def __init__(self, handler: BaseHTTPRequestHandler) -> None:
        split = urlsplit(handler.path)
        self.path = split.path
        self.parts = [p for p in split.path.split("/") if p]
        self.accept = handler.headers.get("Accept") or ""
        self.user = ANONYMOUS
        self.query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        self.handler = handler
        # Read the body whatever happens next: an error answered before reading it would
        # leave it on a kept-alive connection, to be taken for the next request.
        length = int(handler.headers.get("Content-Length") or 0)
        self._raw = handler.rfile.read(length) if length else b""

    @property
    def content_type(self) -> str:
        return self.handler.headers.get("Content-Type", "")

    def body(self) -> Any:
        raw = self._raw
        if not raw:
            return {}
        if (self.handler.headers.get("Content-Type") or "").startswith(protobuf.CONTENT_TYPE):
            try:
                return protobuf.decode(raw)
            except protobuf.ProtobufError as exc:
                raise ApiError(
                    415,
                    "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - {exc}; accepted "
                    "media types include: application/json, application/yaml",
                ) from exc
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ApiError(
                400, "BadRequest", f"the body of the request could not be decoded: {exc}"
            ) from exc


def route(parts: list[str]) -> tuple[ResourceType, str, str, str] | None:
    """(resource, namespace, name, subresource) for a resource path, None for discovery."""
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, rest = parts[1], parts[3:]
    else:
        return None
    if not rest:
        return None
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    resource = BY_PLURAL.get((group, rest[0]))
    if resource is None:
        raise ApiError(404, "NotFound", NOT_FOUND)
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    return resource, namespace, name, sub


def object_body(body: Any, resource: ResourceType) -> Json:
    """A create's or an update's body, which must be an object of the kind."""
    if not isinstance(body, dict):
        raise ApiError(
            400, "BadRequest", f"the body of the request was not a {resource.kind} object"
        )
    return body


def method_not_allowed() -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    )
