"""An approval acts only while the incident it was made for is still the open problem.

Seen as an operator: after an Xid 79 the early `gpu-capacity-short` incident (proposing a
cordon) was resolved when the right `gpu-fell-off-bus` incident opened, and its cordon request
stayed approvable: one vote cordoned the node from an incident that was already over. Each
test here votes on such a request by one of the ways a person can (the service, as a click
does; the executor, as the leader's duties do; `gpubot approve`) and looks at what a person
would: the node's `spec.unschedulable`, the votes and executions stored, the answer given.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.acting.wing import DecisionWing
from bot.config import ActionPolicy, ApprovalPolicy, Remediation, Settings, Thresholds
from bot.model import Action, ActionRequest, Incident, IncidentState, Lang, Signal
from bot.pipeline.service import Service
from bot.sources.alertmanager.payloads import signals_from_payload, validate_payload
from bot.store.sql import SqlStore
from bot.store.tables import incidents, votes
from gpusim import faults
from gpusim.resources import BY_KIND
from tests.helpers.clocks import FakeClock
from tests.helpers.rigs import build_service, console_chat

ONE_PERSON = ActionPolicy(users=["alice", "bob"])


@dataclass
class Bot:
    server: Any
    store: SqlStore
    service: Service
    wing: DecisionWing
    out: io.StringIO
    leader: list[bool]
    url: str

    def cordoned(self, node: str) -> bool:
        found: dict[str, Any] = self.server.store.get(BY_KIND["Node"], "", node)
        return bool(found["spec"].get("unschedulable"))

    def xid79_seen_by_the_watch_first(self, node: str = "gpu-a2") -> tuple[Incident, list[Signal]]:
        """The GPU is gone before its alert arrives: the pass finds fewer GPUs and proposes a
        cordon; the alert is returned for the caller to deliver."""
        result = faults.inject(self.server.store, "xid", node, datetime.now(UTC), code=79, gpu=3)
        alert = signals_from_payload(validate_payload(result.payload()), ["node"])
        [early] = [i for i in self.service.process([]) if i.node == node]
        return early, alert

    def deliver(self, alert: list[Signal]) -> list[Incident]:
        self.store.add_signals(alert, datetime.now(UTC))
        return self.service.process(alert)

    def cordon_request(self, incident: Incident) -> ActionRequest:
        [cordon] = [r for r in self.store.requests(incident.id) if r.action is Action.CORDON]
        return cordon


@pytest.fixture
def bot(sim_cluster: Any, tmp_path: Path) -> Iterator[Bot]:
    yield from _bot(sim_cluster, tmp_path, Lang.EN)


@pytest.fixture
def zh_bot(sim_cluster: Any, tmp_path: Path) -> Iterator[Bot]:
    yield from _bot(sim_cluster, tmp_path, Lang.ZH)


def _bot(sim_cluster: Any, tmp_path: Path, lang: Lang) -> Iterator[Bot]:
    server, cluster = sim_cluster
    settings = Settings(
        lang=lang,
        remediation=Remediation(
            approvals=ApprovalPolicy(cordon=ONE_PERSON, drain=ONE_PERSON, uncordon=ONE_PERSON)
        ),
        # Proposals at once, not held for the alert: what a request that has become wrong
        # does when a vote reaches it is what these tests are about.
        thresholds=Thresholds(settle_s=0),
    )
    url = f"sqlite:///{tmp_path / 'gpubot.db'}"
    store = SqlStore.open(url)
    chat, out = console_chat(settings.lang)
    leader = [True]
    service = build_service(
        cluster,
        store,
        settings,
        clock=FakeClock(real_time=True),
        chat=chat,
        is_leader=lambda: leader[0],
    )
    yield Bot(server, store, service, service.wing, out, leader, url)
    store.close()


def _superseded(bot: Bot) -> tuple[Incident, Incident, ActionRequest]:
    """The early incident's rule superseded in place: one incident, its cordon withdrawn."""
    early, alert = bot.xid79_seen_by_the_watch_first()
    assert early.rule == "gpu-capacity-short"
    cordon = bot.cordon_request(early)
    [right] = [i for i in bot.deliver(alert) if i.node == "gpu-a2"]
    assert right.rule == "gpu-fell-off-bus" and right.id == early.id
    assert bot.store.incident(early.id).state is IncidentState.AWAITING_APPROVAL
    return early, right, cordon


def test_a_vote_on_a_superseded_incidents_request_changes_nothing_and_says_why(
    bot: Bot,
) -> None:
    early, _right, cordon = _superseded(bot)

    outcome = bot.service.approve(cordon.id, "alice")

    assert outcome.status == "withdrawn"
    assert outcome.message.startswith("this request is no longer valid: ")
    assert f"incident {early.id} was superseded at " in outcome.message
    assert "by a better diagnosis: gpu-fell-off-bus" in outcome.message
    assert not bot.cordoned("gpu-a2")
    assert bot.store.votes(cordon.id) == []
    execution = bot.store.execution(cordon.id)
    assert execution is not None and execution.outcome == "withdrawn"
    # A denial is no more welcome: the request is over either way.
    denied = bot.service.deny(cordon.id, "bob", "not needed")
    assert denied.status == "withdrawn" and "no longer valid" in denied.message
    # The chat said so where the buttons were, when it was superseded.
    assert f"request {cordon.id} withdrawn" in bot.out.getvalue()


def test_a_vote_on_a_resolved_incidents_request_changes_nothing_and_says_when(bot: Bot) -> None:
    early, _ = bot.xid79_seen_by_the_watch_first()
    cordon = bot.cordon_request(early)
    bot.service.resolve(early.id, "gpu-capacity-short no longer matches: the symptom is gone")

    outcome = bot.service.approve(cordon.id, "alice")

    assert outcome.status == "withdrawn"
    assert f"this request is no longer valid: incident {early.id} was resolved at " in (
        outcome.message
    )
    assert "the symptom is gone" in outcome.message
    assert not bot.cordoned("gpu-a2")
    assert bot.store.votes(cordon.id) == []
    # Straight to the executor (as the leader's duties call it): refused the same way.
    assert bot.wing.executor.execute(cordon.id).status == "withdrawn"
    assert not bot.cordoned("gpu-a2")


def test_a_vote_recorded_just_before_the_resolve_does_not_act_after_it(bot: Bot) -> None:
    """Recorded first (on a replica that does not lead), resolve next, executor last."""
    bot.leader[0] = False
    early, alert = bot.xid79_seen_by_the_watch_first()
    cordon = bot.cordon_request(early)
    recorded = bot.service.approve(cordon.id, "alice")
    assert recorded.status == "approved"
    assert bot.store.incident(early.id).state is IncidentState.APPROVED

    [right] = [i for i in bot.deliver(alert) if i.node == "gpu-a2"]
    assert right.rule == "gpu-fell-off-bus" and right.id == early.id

    bot.leader[0] = True
    bot.service.run_leader_duties()
    assert not bot.cordoned("gpu-a2")
    execution = bot.store.execution(cordon.id)
    assert execution is not None and execution.outcome == "withdrawn"
    assert "superseded" in execution.detail and "gpu-fell-off-bus" in execution.detail
    again = bot.wing.executor.execute(cordon.id)
    assert again.status == "withdrawn" and "no longer valid" in again.message
    assert not bot.cordoned("gpu-a2")


def test_an_incident_resolved_before_this_rule_existed_still_refuses(bot: Bot) -> None:
    """A store written by an older gpubot holds resolved incidents whose requests were never
    withdrawn: the claim itself looks at the incident, in the transaction that claims."""
    early, _ = bot.xid79_seen_by_the_watch_first()
    cordon = bot.cordon_request(early)
    # What an older gpubot left: the incident resolved, the request with a vote, no execution.
    with bot.store.engine.begin() as tx:
        tx.execute(
            incidents.update()
            .where(incidents.c.id == int(early.id))
            .values(state="resolved", resolved_at=datetime.now(UTC))
        )
        tx.execute(
            votes.insert().values(request_id=cordon.id, approver="alice", at=datetime.now(UTC))
        )
    bot.service.run_leader_duties()
    assert not bot.cordoned("gpu-a2")
    execution = bot.store.execution(cordon.id)
    assert execution is not None and execution.outcome == "withdrawn"
    assert f"incident {early.id} was resolved" in execution.detail


def test_gpubot_approve_on_a_superseded_request_exits_2_and_says_why(
    bot: Bot, tmp_path: Path
) -> None:
    _early, right, cordon = _superseded(bot)
    settings = tmp_path / "settings.yaml"
    settings.write_text("remediation:\n  approvals:\n    cordon: {users: [alice]}\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bot.commands",
            "approve",
            cordon.id,
            "--as",
            "alice",
            "--store-url",
            bot.url,
            "--config",
            str(settings),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 2, done
    said = done.stdout + done.stderr
    assert "this request is no longer valid" in said
    assert f"incident {right.id} was superseded" in said
    assert bot.store.votes(cordon.id) == []
    assert not bot.cordoned("gpu-a2")


def test_under_zh_a_vote_on_a_superseded_request_is_told_why_in_chinese(zh_bot: Bot) -> None:
    """The withdrawal the store wrote ("incident N was superseded at … by a better
    diagnosis: …") reached the voter in English under zh."""
    early, _right, cordon = _superseded(zh_bot)

    outcome = zh_bot.service.approve(cordon.id, "alice")

    assert outcome.status == "withdrawn"
    assert outcome.message.startswith(f"该请求已失效：事件 {early.id} 已于 "), outcome.message
    assert "被更准确的诊断 gpu-fell-off-bus" in outcome.message, outcome.message
    assert "superseded" not in outcome.message and "better diagnosis" not in outcome.message


def test_under_zh_the_thread_and_a_late_vote_say_in_chinese_when_the_incident_was_resolved(
    zh_bot: Bot,
) -> None:
    early, _ = zh_bot.xid79_seen_by_the_watch_first()
    cordon = zh_bot.cordon_request(early)
    zh_bot.service.resolve(early.id, "症状已消失")

    shown = zh_bot.out.getvalue()
    assert f"事件 {early.id} 已于 " in shown and "解决：症状已消失" in shown, shown
    assert "was resolved at" not in shown
    outcome = zh_bot.service.approve(cordon.id, "alice")
    assert outcome.message.startswith(f"该请求已失效：事件 {early.id} 已于 "), outcome.message
    assert outcome.message.endswith(" UTC 解决：症状已消失"), outcome.message
