"""Who a request is and whether RBAC lets it through: the authentication, impersonation and
authorization steps of kube-apiserver's handler chain (`WithAuthentication`,
`WithImpersonation`, `WithAuthorization`), kept current with the cluster.

Tokens and RBAC rules are objects in the cluster (ServiceAccounts, roles, bindings) that a
test or the bot's chart changes while the server runs, and every request needs both; so the
token table and the compiled policy are rebuilt only when the store's version of those kinds
moves. The rules themselves are `gpusim.authorization`'s, the tokens `gpusim.credentials`'
and what the `Impersonate-*` headers ask `gpusim.impersonation`'s.

It must never write to the cluster, nor decide anything RBAC and the issued tokens do not.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from bot.kube_objects import meta, name_of, namespace_of
from gpusim.authorization import (
    ANONYMOUS,
    Attributes,
    Policy,
    User,
    forbidden,
    service_account_user,
)
from gpusim.credentials import ADMIN_GROUPS, ADMIN_USER, Credentials
from gpusim.impersonation import impersonation
from gpusim.resources import BY_KIND, ApiError
from gpusim.state import ClusterState

RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
UNAUTHORIZED = ApiError(401, "Unauthorized", "Unauthorized")
"""What `WithAuthentication` answers a request whose credentials nobody issued."""


class AccessControl:
    """The token table (bearer token -> user) and the compiled RBAC policy of one cluster,
    each with the kind versions it was built at. It owns those two caches and their lock; it
    must never answer from a cache older than the objects it was built from."""

    def __init__(self, store: ClusterState, credentials: Credentials) -> None:
        self.store = store
        self._credentials = credentials
        self._policy: tuple[tuple[int, ...], Policy] | None = None
        self._tokens: tuple[int, dict[str, User]] | None = None
        self._lock = threading.Lock()

    def authenticate(self, header: str) -> User:
        """The user an `Authorization` header names; no header is `system:anonymous`, a token
        nobody issued is the 401."""
        if not header:
            return ANONYMOUS
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise UNAUTHORIZED
        user = self._users().get(token.strip())
        if user is None:
            raise UNAUTHORIZED
        return user

    def impersonate(self, caller: User, headers: Sequence[tuple[str, str]]) -> User | None:
        """The user `caller` acts as by the request's `Impersonate-*` headers, once RBAC let
        it `impersonate` each (the first refused is that 403); None without such headers.
        `impersonation.HeadersError` for groups, extras or a uid without a user."""
        asked = impersonation(caller, headers)
        if asked is None:
            return None
        for check in asked.checks:
            self.authorize(check)
        return asked.user

    def authorize(self, attributes: Attributes) -> None:
        """Nothing when RBAC allows the request; the 403 `WithAuthorization` writes when not."""
        allowed, reason = self.policy().authorize(attributes)
        if not allowed:
            raise forbidden(attributes, reason)

    def policy(self) -> Policy:
        """The cluster's RBAC objects, compiled; compiled again after any of them changes."""
        versions = tuple(self.store.kind_versions.get(kind, 0) for kind in RBAC_KINDS)
        with self._lock:
            if self._policy is not None and self._policy[0] == versions:
                return self._policy[1]
        lists = [self.store.list(BY_KIND[kind], "")[0] for kind in RBAC_KINDS]
        compiled = Policy(*lists)
        with self._lock:
            self._policy = (versions, compiled)
        return compiled

    def _users(self) -> dict[str, User]:
        """Bearer token -> user: the admin's and one per ServiceAccount, rebuilt when the
        ServiceAccounts change."""
        version = self.store.kind_versions.get("ServiceAccount", 0)
        with self._lock:
            if self._tokens is not None and self._tokens[0] == version:
                return self._tokens[1]
        users = {self._credentials.admin_token: User(ADMIN_USER, ADMIN_GROUPS)}
        accounts, _ = self.store.list(BY_KIND["ServiceAccount"], "")
        for account in accounts:
            namespace, name = namespace_of(account), name_of(account)
            uid = str(meta(account).get("uid", ""))
            users[self._credentials.token_for(namespace, name, uid)] = service_account_user(
                namespace, name, uid
            )
        with self._lock:
            self._tokens = (version, users)
        return users
