"""The simulated API server's audit log: every request with its user (and the user it
impersonated), RBAC verb, resource and status code, as kube-apiserver's audit backend
records it.

Tests read it to show what a real cluster's audit log would: that a ServiceAccount got no
401 or 403, or which permission a step used. It must never change what a request gets, nor
grow without bound (a drill's simulated hour must stay within memory).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

from gpusim.authorization import Attributes, User

AUDIT_LIMIT = 100_000
"""Requests `audit()` keeps, newest last: a drill's simulated hour stays within memory."""


@dataclass(frozen=True)
class AuditEvent:
    """One request as kube-apiserver's audit log has it at ResponseComplete (a watch: at
    ResponseStarted): who, the RBAC verb and resource it was authorized as, and the status
    code answered. `user` is "" for credentials nobody issued (the 401). A request made with
    `Impersonate-*` headers is, as kube-apiserver's audit event has it (audit.LogImpersonatedUser),
    the authenticated caller's in `user` and the one it acted as in `impersonated_user` ("" when
    it impersonated no one, or was refused the impersonation)."""

    user: str
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    path: str
    code: int
    impersonated_user: str = ""

    def __str__(self) -> str:
        resource = f"{self.resource}.{self.group}" if self.group else self.resource
        if self.subresource:
            resource += f"/{self.subresource}"
        where = f" -n {self.namespace}" if self.namespace else ""
        what = f"{self.verb} {resource or self.path}{f' {self.name}' if self.name else ''}"
        who = self.user or "?"
        if self.impersonated_user:
            who += f" as {self.impersonated_user}"
        return f"{who}: {what}{where} -> {self.code}"


class AuditLog:
    """The newest AUDIT_LIMIT requests, oldest first. It owns that bounded list and its lock
    (requests are served on many threads); it must never drop a request but the oldest."""

    def __init__(self, limit: int = AUDIT_LIMIT) -> None:
        self._events: deque[AuditEvent] = deque(maxlen=limit)
        self._lock = threading.Lock()

    def events(self) -> list[AuditEvent]:
        with self._lock:
            return list(self._events)

    def record(self, attributes: Attributes, code: int, caller: User | None = None) -> None:
        """One request as it was authorized; `caller` is the authenticated user when it
        impersonated `attributes.user`."""
        impersonated = attributes.user.name if caller is not None else ""
        event = AuditEvent(
            caller.name if caller is not None else attributes.user.name,
            attributes.verb,
            attributes.api_group,
            attributes.resource,
            attributes.subresource,
            attributes.namespace,
            attributes.name,
            attributes.path,
            code,
            impersonated,
        )
        with self._lock:
            self._events.append(event)
