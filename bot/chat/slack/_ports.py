"""What the Slack adapter needs from the engine: a new request for `/gpubot
cordon|drain|uncordon` (`Requests`), a node's facts for `/gpubot status` (`Facts`), and the
decisions (`Engine`).

Why it exists: the adapter must never decide who may approve, or act
(docs/architecture.md, invariant 1).
Every click goes to the engine (`Engine.approve` / `Engine.deny`, which
`bot.pipeline.service.Service` satisfies), and the answer the engine gives is what the person
sees. Writing down the little the adapter asks of the engine keeps the adapter testable with
the real service behind it, and keeps `bot.chat` independent of `bot.approval`, `bot.acting`
and `bot.pipeline` (the layers contract).

What it must never do: import the engine. These are `typing.Protocol`s, nothing more.
"""

from __future__ import annotations

from typing import Protocol

from bot.incidents.timeline import Timeline
from bot.model import Action, ActionRequest, ClusterFacts, NodeFacts, Outcome
from bot.ports import Store


class Requests(Protocol):
    """What a slash command needs to propose: a new request
    (`bot.approval.proposing.Proposals`)."""

    def request(
        self, action: Action, node: NodeFacts, incident: str | None, requested_by: str
    ) -> ActionRequest: ...


class Facts(Protocol):
    """A node's facts read afresh (`bot.facts.fresh.FreshFacts`)."""

    def of_node(self, node: str) -> ClusterFacts: ...


class Engine(Protocol):
    """What decides (`bot.pipeline.service.Service` as it is). Its answer to a vote is an
    `Outcome`, in the one vocabulary of what happened to a request (`RequestStatus`)."""

    @property
    def store(self) -> Store: ...
    @property
    def proposals(self) -> Requests: ...
    @property
    def facts(self) -> Facts: ...
    @property
    def timeline(self) -> Timeline:
        """The one writer of the incident's timeline (a snooze is noted there)."""
        ...

    def approve(self, request_id: str, approver: str) -> Outcome: ...
    def deny(self, request_id: str, who: str, reason: str = "") -> Outcome: ...
