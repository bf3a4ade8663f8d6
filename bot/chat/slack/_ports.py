"""What the Slack adapter needs from the engine: the answer to a click (`Decided`), a new
request for `/gpubot cordon|drain|uncordon` (`Requests`), and the decisions (`Engine`).

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

from bot.model import Action, ActionRequest, ClusterFacts, NodeFacts
from bot.ports import Store


class Decided(Protocol):
    """An engine's answer to a click (`bot.approval.voting.Outcome`)."""

    @property
    def request_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def new_request(self) -> ActionRequest | None: ...
    @property
    def approvals_needed(self) -> int | None:
        """With `need-another`: how many people the policy asks (`approvals_needed`)."""
        ...


class Requests(Protocol):
    """What a slash command needs of the executor: facts of a node, and a new request."""

    def request(
        self, action: Action, node: NodeFacts, incident: str | None, requested_by: str
    ) -> ActionRequest: ...

    def read_facts(self, node: str) -> ClusterFacts: ...


class Engine(Protocol):
    """What decides (`bot.pipeline.service.Service` as it is)."""

    @property
    def store(self) -> Store: ...
    @property
    def executor(self) -> Requests: ...
    def approve(self, request_id: str, approver: str) -> Decided: ...
    def deny(self, request_id: str, who: str, reason: str = "") -> Decided: ...
