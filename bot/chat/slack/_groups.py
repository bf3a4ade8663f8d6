"""Slack user groups for the approval policy: `SlackGroups(user)` says which of the policy's
groups a Slack user is in.

Why it exists: a policy may name who approves by user group (`@gpu-oncall`, or its id
`S0123`), and only Slack knows who is in one. Who is in a group comes from `usergroups.list`
(ids ↔ handles) and `usergroups.users.list`, cached for a minute.

What it must never do: grant an approval because Slack could not be asked. When Slack is
down, the last answer serves for a while (`max_stale_s`); after that nobody is in any group,
so approvals by group are refused, never granted. It never decides an approval either: the
policy (`bot.approval.policy.decide`) does, with this as its `groups_of`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from http.client import HTTPException
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.config import ApprovalPolicy

log = logging.getLogger("gpubot.slack")


class SlackGroups:
    """`groups_of(user)` for the approval policy: the ids and handles of the policy's user
    groups that have `user`, from `usergroups.list` and `usergroups.users.list`, cached for
    `ttl_s`. When Slack cannot be asked, the last answer serves for up to `max_stale_s`,
    then nobody is in any group (approvals by group are refused, never granted).

    Owns the cache: who is in which group, when it was fetched, and when Slack was last
    tried (at most every 5 s while it fails). Must never answer from a cache older than
    `ttl_s + max_stale_s`, nor ask Slack on every call.
    """

    def __init__(
        self,
        client: WebClient,
        names: Iterable[str],
        *,
        ttl_s: float = 60.0,
        max_stale_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.names = sorted({n.lstrip("@") for n in names if n.strip("@ ")})
        self.ttl_s = ttl_s
        self.max_stale_s = max_stale_s
        self.clock = clock
        self._lock = threading.Lock()
        self._members: dict[str, set[str]] = {}
        self._fetched_at: float | None = None
        self._tried_at: float | None = None

    @classmethod
    def for_policy(cls, client: WebClient, policy: ApprovalPolicy, **kwargs: Any) -> SlackGroups:
        rules = (policy.cordon, policy.drain, policy.uncordon, policy.force, policy.uncordon_anyway)
        groups = [g for rule in rules for g in rule.groups] + policy.deny.groups
        return cls(client, groups, **kwargs)

    def __call__(self, user_id: str) -> set[str]:
        if not self.names:
            return set()
        with self._lock:
            now = self.clock()
            fresh = self._fetched_at is not None and now - self._fetched_at < self.ttl_s
            tried = self._tried_at is not None and now - self._tried_at < min(5.0, self.ttl_s)
            if not fresh and not tried:
                self._tried_at = now
                try:
                    self._members = self._fetch()
                    self._fetched_at = now
                except (SlackApiError, OSError, HTTPException) as error:
                    log.warning("could not read Slack user groups: %s", error)
            if self._fetched_at is None or now - self._fetched_at > self.ttl_s + self.max_stale_s:
                return set()
            return set(self._members.get(user_id, set()))

    def _fetch(self) -> dict[str, set[str]]:
        listing = self.client.usergroups_list().get("usergroups") or []
        handles = {
            str(g["id"]): str(g.get("handle") or "")
            for g in listing
            if isinstance(g, dict) and "id" in g
        }
        ids = {handle: gid for gid, handle in handles.items() if handle}
        members: dict[str, set[str]] = {}
        for name in self.names:
            gid = name if name in handles else ids.get(name)
            if gid is None:
                log.warning("user group %r of the approval policy is not in Slack", name)
                continue
            users = self.client.usergroups_users_list(usergroup=gid).get("users") or []
            for user in users:
                members.setdefault(str(user), set()).update({gid, handles[gid], name} - {""})
        return members
