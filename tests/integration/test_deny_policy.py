"""Issue 15 item 3: a deny is a decision like an approval. Seen as an operator: a user named in
no policy denied a cordon, and the rightful approver was then refused. Here a stranger's deny
changes nothing (on the leader and on a replica that does not lead) and says who may; the
rightful approver then approves and the node is cordoned or drained."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bot.model import Action, IncidentState, Lang
from gpusim.resources import BY_KIND
from tests.integration import test_service
from tests.integration.test_service import Bot

bot = test_service.bot  # the running bot of test_service: ONE_PERSON (alice, bob) approves


def _cordoned(bot: Bot) -> bool:
    return bool(bot.server.store.get(BY_KIND["Node"], "", "gpu-a2")["spec"].get("unschedulable"))


def _xid79(bot: Bot) -> tuple[str, str]:
    signals = bot.alert("xid", "gpu-a2", code=79, gpu=3)
    [incident] = [i for i in bot.service.process(signals) if i.node == "gpu-a2"]
    [drain] = [r for r in bot.store.requests(incident.id) if r.action is Action.DRAIN]
    return incident.id, drain.id


def test_a_stranger_cannot_deny_and_is_told_who_may_then_the_approver_approves(bot: Bot) -> None:
    incident, drain = _xid79(bot)

    refused = bot.service.deny(drain, "mallory", "I do not like it")

    assert refused.status == "not-allowed"
    assert "you are not allowed to deny drain on gpu-a2" in refused.message
    assert "alice" in refused.message and "bob" in refused.message
    assert bot.store.execution(drain) is None
    assert bot.store.incident(incident).state is IncidentState.AWAITING_APPROVAL
    assert "denied" not in bot.said
    # The timeline keeps the attempt, as it keeps a refused approval.
    assert any("denial by mallory refused" in e.text for e in bot.store.timeline(incident))

    approved = bot.service.approve(drain, "alice")
    assert approved.status == "succeeded", approved.message
    assert _cordoned(bot)


def test_a_replica_that_does_not_lead_refuses_a_strangers_deny_too(bot: Bot) -> None:
    _, drain = _xid79(bot)
    bot.leader[0] = False

    assert bot.service.deny(drain, "mallory").status == "not-allowed"
    assert bot.store.execution(drain) is None

    assert bot.service.approve(drain, "bob").status == "approved"
    bot.leader[0] = True
    [acted] = bot.service.run_leader_duties()
    assert acted.status == "succeeded", acted.message
    assert _cordoned(bot)


def test_an_approver_may_deny_and_the_refusal_speaks_chinese_when_the_bot_does(bot: Bot) -> None:
    incident, drain = _xid79(bot)
    bot.service.settings.lang = Lang.ZH

    refused = bot.service.deny(drain, "mallory")
    assert refused.status == "not-allowed"
    assert refused.message.startswith("你无权拒绝对 gpu-a2 的 drain")
    assert "alice" in refused.message and "bob" in refused.message

    denied = bot.service.deny(drain, "bob", "the job checkpoints in 10 minutes")
    assert denied.status == "denied"
    assert bot.store.incident(incident).state is IncidentState.DENIED
    assert not _cordoned(bot)


def _gpubot_deny(
    request: str, who: str, store: Path, config: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "bot.commands",
            "deny",
            request,
            "--as",
            who,
            "--reason",
            "not during the training run",
            "--store-url",
            f"sqlite:///{store}",
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_gpubot_deny_refuses_a_stranger_with_exit_2_and_records_an_approvers(
    bot: Bot, tmp_path: Path
) -> None:
    incident, drain = _xid79(bot)
    config = tmp_path / "settings.yaml"
    config.write_text("remediation:\n  approvals:\n    drain: {users: [alice, bob]}\n")

    stranger = _gpubot_deny(drain, "mallory", tmp_path / "gpubot.db", config)
    assert stranger.returncode == 2, stranger
    assert "you are not allowed to deny drain on gpu-a2 (may deny it: alice, bob)" in (
        stranger.stderr
    )
    assert bot.store.execution(drain) is None

    approver = _gpubot_deny(drain, "bob", tmp_path / "gpubot.db", config)
    assert approver.returncode == 0, approver
    assert "denied by bob" in approver.stdout
    denied = bot.store.execution(drain)
    assert denied is not None and denied.outcome == "denied"
    assert bot.store.incident(incident).state is IncidentState.DENIED
    assert not _cordoned(bot)


def test_a_vote_on_a_denied_or_unknown_request_is_told_in_chinese(bot: Bot) -> None:
    """Issue 19 item 7: the answers to a late vote were English whatever the language."""
    _, drain = _xid79(bot)
    bot.service.settings.lang = Lang.ZH

    unknown = bot.service.approve("no-such-id", "alice")
    assert (unknown.status, unknown.message) == ("not-allowed", "没有这个请求")

    assert bot.service.deny(drain, "bob", "先保存检查点").status == "denied"
    late = bot.service.approve(drain, "alice")
    assert late.status == "not-allowed"
    assert late.message == "bob 已拒绝：先保存检查点"
    assert not _cordoned(bot)


def test_a_refused_or_repeated_deny_and_a_vote_on_a_resolved_incident_are_told_in_chinese(
    bot: Bot,
) -> None:
    """The timeline's "denial by … refused", the answers "… denied by …", "already denied by …"
    and "this request is no longer valid" were English under zh."""
    incident, drain = _xid79(bot)
    bot.service.settings.lang = Lang.ZH

    assert bot.service.deny(drain, "mallory").status == "not-allowed"
    [refusal] = [e.text for e in bot.store.timeline(incident) if "mallory" in e.text]
    assert refusal.startswith("mallory 的拒绝被驳回：你无权拒绝"), refusal

    denied = bot.service.deny(drain, "bob", "先保存检查点")
    assert denied.message == "bob 拒绝了 kubectl drain gpu-a2 --ignore-daemonsets"
    again = bot.service.deny(drain, "alice")
    assert (again.status, again.message) == ("duplicate", "已被 bob 拒绝")

    other_incident, cordon = _xid79_cordon_request(bot)
    bot.service.resolve(other_incident, "症状已消失")
    late = bot.service.approve(cordon, "alice")
    assert late.status == "withdrawn"
    assert late.message.startswith("该请求已失效："), late.message


def _xid79_cordon_request(bot: Bot) -> tuple[str, str]:
    signals = bot.alert("xid", "gpu-a3", code=79, gpu=1)
    [incident] = [i for i in bot.service.process(signals) if i.node == "gpu-a3"]
    requests = bot.store.requests(incident.id)
    return incident.id, requests[0].id


def test_a_denial_without_a_reason_is_told_in_chinese_to_a_late_voter(bot: Bot) -> None:
    """The reason stored for a denial without one ("no reason given") reached people in
    English under zh."""
    _, drain = _xid79(bot)
    bot.service.settings.lang = Lang.ZH

    assert bot.service.deny(drain, "bob").status == "denied"
    late = bot.service.approve(drain, "alice")

    assert (late.status, late.message) == ("not-allowed", "bob 已拒绝：未说明理由")


def test_a_denial_without_a_reason_still_reads_no_reason_given_in_english(bot: Bot) -> None:
    _, drain = _xid79(bot)

    assert bot.service.deny(drain, "bob").status == "denied"
    late = bot.service.approve(drain, "alice")

    assert late.message == "bob denied this: no reason given"
