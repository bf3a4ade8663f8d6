"""The diagnosis message in Block Kit: content, buttons, limits, languages, decisions.

Diagnoses come from the real pipeline (shipped rules on the healthy snapshot with one edit);
requests from the real approval policy. Every message is checked through slack_sdk's own
validation (`to_dict()` raises `SlackObjectFormationError` past a limit) and against Slack's
documented limits, counted as Slack counts them (UTF-16 code units).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block, SectionBlock

from bot.approval.policy import new_request
from bot.chat.blocks import (
    APPROVE_ACTION,
    DENY_ACTION,
    INCIDENT_BLOCK_ID,
    SNOOZE_ACTION,
    TIMELINE_ACTION,
    decided_blocks,
    decision_text,
    diagnosis_blocks,
    diagnosis_key,
    fallback_text,
)
from bot.config import ApprovalPolicy, Settings
from bot.facts.snapshots import Snapshot
from bot.model import Action, ActionRequest, Blocker, ClusterFacts, Diagnosis, Lang, RunbookStep
from bot.roots.offline import diagnose_snapshot, load_ruleset
from tests.helpers.paths import NOW
from tests.helpers.slack_double import SlackDouble

RISK = "2 training pods without a checkpoint in the last 30 min will lose progress"
ZERO_GPUS = {
    "kind": "Node",
    "name": "gpu-a2",
    "merge": {
        "status": {"capacity": {"nvidia.com/gpu": "0"}, "allocatable": {"nvidia.com/gpu": "0"}}
    },
}


def _units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _walk(value: Any) -> Iterator[dict[str, Any]]:
    """Every dict inside a block dict, depth first."""
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def _texts(posted: list[dict[str, Any]]) -> str:
    return "\n".join(
        d["text"] for d in _walk(posted) if isinstance(d.get("text"), str) and "type" in d
    )


def _buttons(posted: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in _walk(posted) if d.get("type") == "button"]


def _posted(blocks: list[Block]) -> list[dict[str, Any]]:
    """What the adapter sends: slack_sdk validates every block (and every nested object)."""
    return [b.to_dict() for b in blocks]


@pytest.fixture
def capacity_zero(
    settings: Settings,
    edited: Callable[..., Snapshot],
    facts_of: Callable[..., ClusterFacts],
) -> Callable[[Lang], tuple[Diagnosis, ClusterFacts]]:
    rules = load_ruleset(settings)

    def make(lang: Lang) -> tuple[Diagnosis, ClusterFacts]:
        snapshot = edited(ZERO_GPUS)
        result = diagnose_snapshot(snapshot, [], rules, settings, NOW, lang)
        [diagnosis] = [d for d in result.diagnoses if d.rule == "gpu-capacity-zero"]
        return diagnosis, facts_of(snapshot)

    return make


def _request(
    facts: ClusterFacts, action: Action, request_id: str = "req-1", **kwargs: Any
) -> ActionRequest:
    return new_request(
        request_id,
        action,
        facts.nodes["gpu-a2"],
        "gpubot",
        NOW,
        ApprovalPolicy(),
        incident="inc-42",
        **kwargs,
    )


def test_capacity_zero_message_has_the_answers_the_runbook_and_the_buttons(
    capacity_zero: Callable[[Lang], tuple[Diagnosis, ClusterFacts]],
) -> None:
    d, facts = capacity_zero(Lang.EN)
    assert [(p.action, p.node) for p in d.proposals] == [(Action.CORDON, "gpu-a2")]
    request = _request(facts, Action.CORDON, risk=RISK)

    posted = _posted(diagnosis_blocks(d, [request], Lang.EN))
    text = _texts(posted)

    header = posted[0]
    assert header["type"] == "header"
    for part in ("CRITICAL", "gpu-a2", "a100-east", d.title):
        assert part in header["text"]["text"]
    assert "stage: *steady*" in text and "`gpu-capacity-zero`" in text
    [questions] = [b for b in posted if "fields" in b]
    fields = [f["text"] for f in questions["fields"]]
    assert fields == [
        "*Registered?*\nyes: Ready, kubelet v1.30.4, runtime containerd://1.7.13",
        "*GPUs visible?*\nno: 0 of 8 nvidia.com/gpu allocatable",
        "*Why didn't workloads go?*\n1 GPU pod(s) running here; no GPU pod is Pending",
        "*How wide?*\n1 of 4 nodes in pool a100-east show this",
    ]
    assert "allocatable nvidia.com/gpu=0, capacity=0, nvidia.com/gpu.count=8" in text
    code = "\n".join(
        part["text"]
        for element in _walk(posted)
        if element.get("type") == "rich_text_preformatted"
        for part in element["elements"]
    )
    commands = [c for step in d.runbook for c in step.commands]
    assert commands and all(c in code.splitlines() for c in commands)
    assert "kubectl describe node gpu-a2" in code

    buttons = {b["action_id"]: b for b in _buttons(posted)}
    assert set(buttons) == {APPROVE_ACTION, DENY_ACTION, SNOOZE_ACTION, TIMELINE_ACTION}
    approve = buttons[APPROVE_ACTION]
    assert approve["text"]["text"] == "Approve cordon"
    assert approve["value"] == buttons[DENY_ACTION]["value"] == "req-1"
    assert buttons[DENY_ACTION]["text"]["text"] == "Deny"
    assert buttons[SNOOZE_ACTION]["text"]["text"] == "Snooze 1h"
    assert buttons[TIMELINE_ACTION]["text"]["text"] == "Timeline"
    assert buttons[SNOOZE_ACTION]["value"] == buttons[TIMELINE_ACTION]["value"] == "inc-42"
    confirm = approve["confirm"]
    assert "gpu-a2" in confirm["title"]["text"]
    assert "New pods will no longer be scheduled on gpu-a2" in confirm["text"]["text"]
    assert f"Risk: {RISK}" in confirm["text"]["text"]
    assert "Expires 03:30 UTC" in confirm["text"]["text"]
    # slack_sdk reads back what it wrote: the message round-trips as Slack returns it
    assert [Block.parse(b).to_dict() for b in posted] == posted  # type: ignore[union-attr]


def test_drain_is_danger_with_a_dialog_force_says_so_uncordon_asks_nothing(
    capacity_zero: Callable[[Lang], tuple[Diagnosis, ClusterFacts]],
) -> None:
    d, facts = capacity_zero(Lang.EN)
    requests = [
        _request(facts, Action.DRAIN, "r-drain", risk=RISK, delete_emptydir_data=True),
        _request(facts, Action.DRAIN, "r-force", force=True),
        _request(facts, Action.UNCORDON, "r-uncordon"),
        _request(facts, Action.UNCORDON, "r-anyway", override_gate=True),
    ]
    posted = _posted(diagnosis_blocks(d, requests, Lang.EN))
    approve = {b["value"]: b for b in _buttons(posted) if b["action_id"] == APPROVE_ACTION}
    assert list(approve) == ["r-drain", "r-force", "r-uncordon", "r-anyway"]

    drain = approve["r-drain"]
    assert drain["text"]["text"] == "Approve drain"
    assert drain["style"] == "danger" and drain["confirm"]["style"] == "danger"
    said = drain["confirm"]["text"]["text"]
    assert "Eviction API" in said and "PodDisruptionBudgets" in said and RISK in said
    assert "emptyDir data is lost" in said

    force = approve["r-force"]
    assert force["text"]["text"] == "Approve drain --force"
    assert "deleted directly (--force)" in force["confirm"]["text"]["text"]

    assert approve["r-uncordon"]["text"]["text"] == "Approve uncordon"
    assert "confirm" not in approve["r-uncordon"]
    assert approve["r-uncordon"]["style"] == "primary"
    assert "health gate did not pass" in approve["r-anyway"]["confirm"]["text"]["text"]

    # one actions block per request: action ids are unique within each block
    for block in posted:
        if block["type"] == "actions":
            ids = [e["action_id"] for e in block["elements"]]
            assert len(ids) == len(set(ids))
    assert len({b.get("block_id") for b in posted}) == len(posted)


def test_without_requests_the_proposal_shows_and_snooze_falls_back_to_the_key(
    capacity_zero: Callable[[Lang], tuple[Diagnosis, ClusterFacts]],
) -> None:
    d, _ = capacity_zero(Lang.EN)
    posted = _posted(diagnosis_blocks(d))
    assert "*Proposed*: cordon gpu-a2 (needs approval)" in _texts(posted)
    buttons = {b["action_id"]: b["value"] for b in _buttons(posted)}
    assert buttons == {
        SNOOZE_ACTION: "gpu-capacity-zero/gpu-a2",
        TIMELINE_ACTION: "gpu-capacity-zero/gpu-a2",
    }
    assert diagnosis_key(d) == "gpu-capacity-zero/gpu-a2"


def _huge(d: Diagnosis, evidence: int) -> Diagnosis:
    big = "x" * 5000
    return d.model_copy(
        update={
            "node": "gpu-" + "n" * 300,
            "title": "🔥" * 400,
            "summary": big * 3,
            "check_first": big,
            "rollback": big,
            "questions": d.questions.model_copy(
                update={"registered": big, "gpu_visible": big, "workloads": big, "scope": big}
            ),
            "evidence": [f"line {i}: " + "e" * 1000 for i in range(evidence)],
            "blockers": [
                Blocker(kind="pdb", pod=f"p{i}", namespace="ns", detail="d" * 900)
                for i in range(300)
            ],
            "runbook": [
                RunbookStep(text="s" * 900, commands=["kubectl " + "c" * 900] * 3)
                for _ in range(200)
            ],
        }
    )


def test_limits_hold_for_huge_diagnoses_and_the_rest_points_to_the_timeline(
    capacity_zero: Callable[[Lang], tuple[Diagnosis, ClusterFacts]],
) -> None:
    d, facts = capacity_zero(Lang.EN)
    d = _huge(d, evidence=500)
    requests = [
        _request(facts, Action.DRAIN, f"r{i}-" + "i" * 300, risk="r" * 5000) for i in range(60)
    ]
    blocks = diagnosis_blocks(d, requests, Lang.EN)
    assert len(blocks) <= 49  # one slot left for the decision
    for made in blocks:
        made.validate_json()  # slack_sdk's own validators
    posted = _posted(blocks)

    assert _units(posted[0]["text"]["text"]) <= 150
    for block in posted:
        if block["type"] == "section":
            if "text" in block:
                assert _units(block["text"]["text"]) <= 3000
            for field in block.get("fields", []):
                assert _units(field["text"]) <= 2000
            assert len(block.get("fields", [])) <= 10
        if block["type"] == "context":
            assert len(block["elements"]) <= 10
        assert len(block.get("block_id", "")) <= 255
    runbook = [b for b in posted if b["type"] == "rich_text"]
    assert sum(_units(d["text"]) for d in _walk(runbook) if d.get("type") == "text") <= 3000
    for button in _buttons(posted):
        assert _units(button["text"]["text"]) <= 75
        assert len(button["value"]) <= 2000
        if "confirm" in button:
            confirm = button["confirm"]
            assert _units(confirm["title"]["text"]) <= 100
            assert _units(confirm["text"]["text"]) <= 300
            assert _units(confirm["confirm"]["text"]) <= 30
            assert "Risk: rrr" in confirm["text"]["text"]  # cut, never dropped

    [evidence] = [b for b in posted if b.get("block_id") == "gpubot.evidence"]
    shown = evidence["text"]["text"].count("\n• ")
    assert 0 < shown <= 10
    assert evidence["text"]["text"].endswith(f"… {500 - shown} more in the timeline")
    [blockers] = [b for b in posted if b.get("block_id") == "gpubot.blockers"]
    assert blockers["text"]["text"].endswith("more in the timeline")
    assert "more in the timeline" in _texts(runbook)
    approves = [b for b in _buttons(posted) if b["action_id"] == APPROVE_ACTION]
    assert 0 < len(approves) < 60
    [more] = [b for b in posted if b.get("block_id") == "gpubot.requests-more"]
    assert more["elements"][0]["text"] == f"… {60 - len(approves)} more in the timeline"
    assert posted[-1]["block_id"] == INCIDENT_BLOCK_ID


def test_slack_sdk_validation_bites_so_passing_it_means_something() -> None:
    with pytest.raises(SlackObjectFormationError):
        SectionBlock(text="x" * 3001).to_dict()


def test_text_from_the_cluster_cannot_mention_or_link(
    capacity_zero: Callable[[Lang], tuple[Diagnosis, ClusterFacts]],
) -> None:
    d, _ = capacity_zero(Lang.EN)
    d = d.model_copy(update={"evidence": ["pod message: <!channel> <https://evil|click> & co"]})
    posted = _posted(diagnosis_blocks(d))
    text = _texts(posted)
    assert "<!channel>" not in text and "<https://" not in text
    assert "&lt;!channel&gt; &lt;https://evil|click&gt; &amp; co" in text
    assert "<" not in fallback_text(d.model_copy(update={"title": "<!here> GPU gone"}))


def test_chinese_message_is_chinese(
    capacity_zero: Callable[[Lang], tuple[Diagnosis, ClusterFacts]],
) -> None:
    d, facts = capacity_zero(Lang.ZH)
    requests = [
        _request(facts, Action.CORDON, "r1", risk="2 个训练 Pod 最近 30 分钟没有 checkpoint"),
        _request(facts, Action.DRAIN, "r2"),
        _request(facts, Action.UNCORDON, "r3"),
    ]
    posted = _posted(diagnosis_blocks(d, requests, Lang.ZH))
    text = _texts(posted)
    assert posted[0]["text"]["text"].startswith("🔴 严重 · gpu-a2 (a100-east) · 节点 Ready")
    assert "阶段: *稳定运行*" in text
    for label in (
        "节点注册了吗？",
        "GPU 被调度器看见了吗？",
        "工作负载为什么没走？",
        "变更范围多大？",
    ):
        assert f"*{label}*" in text
    assert "节点池 a100-east 的 4 个节点中有 1 个出现此问题" in text
    assert "*证据*" in text and "处置步骤" in text and "*回滚*" in text
    labels = [b["text"]["text"] for b in _buttons(posted)]
    assert labels == [
        "批准 cordon",
        "拒绝",
        "批准 drain",
        "拒绝",
        "批准 uncordon",
        "拒绝",
        "静默 1 小时",
        "时间线",
    ]
    confirm = _buttons(posted)[0]["confirm"]
    assert "不再调度新的 Pod" in confirm["text"]["text"]
    assert "风险：2 个训练 Pod" in confirm["text"]["text"]
    assert confirm["deny"]["text"] == "取消"
    assert "严重" in fallback_text(d) and "容量为零" in fallback_text(d)


def test_fallback_text_names_severity_subject_symptom_and_scope(
    capacity_zero: Callable[[Lang], tuple[Diagnosis, ClusterFacts]],
) -> None:
    d, _ = capacity_zero(Lang.EN)
    assert fallback_text(d) == (
        "🔴 CRITICAL · gpu-a2 (a100-east): Node Ready but nvidia.com/gpu capacity is zero"
        " — 1 of 4 nodes in pool a100-east show this"
    )
    assert _units(fallback_text(_huge(d, evidence=1))) <= 500


def test_a_decision_replaces_that_requests_buttons_and_says_who_what_when(
    capacity_zero: Callable[[Lang], tuple[Diagnosis, ClusterFacts]],
) -> None:
    d, facts = capacity_zero(Lang.EN)
    cordon = _request(facts, Action.CORDON, "r-cordon")
    drain = _request(facts, Action.DRAIN, "r-drain")
    # what Slack hands back in an interaction payload: `message.blocks`, as dicts
    message = _posted(diagnosis_blocks(d, [cordon, drain], Lang.EN))
    at = datetime(2026, 12, 2, 3, 12, 40, tzinfo=UTC)
    said = decision_text(drain, "approved", ["U1", "U2"], at, Lang.EN)
    assert said == "✅ drain gpu-a2 approved by <@U1> and <@U2> at 03:12 UTC"
    forged = decision_text(drain, "denied", ["<!channel>", "<@U1>"], at, Lang.EN)
    assert forged == "🚫 drain gpu-a2 denied by &lt;!channel&gt; and <@U1> at 03:12 UTC"

    after = _posted(decided_blocks(message, said, request_id="r-drain"))
    buttons = [(b["action_id"], b["value"]) for b in _buttons(after)]
    assert buttons == [
        (APPROVE_ACTION, "r-cordon"),
        (DENY_ACTION, "r-cordon"),
        (SNOOZE_ACTION, "inc-42"),
        (TIMELINE_ACTION, "inc-42"),
    ]
    assert said in _texts(after)
    assert "request r-drain" not in _texts(after) and "request r-cordon" in _texts(after)
    assert len(after) == len(message) - 1  # two blocks of the request out, the decision in

    denied = decision_text(cordon, "denied", ["U3"], at + timedelta(minutes=1), Lang.EN)
    final = _posted(decided_blocks(after, denied))
    assert [b["action_id"] for b in _buttons(final)] == [SNOOZE_ACTION, TIMELINE_ACTION]
    assert "🚫 cordon gpu-a2 denied by <@U3> at 03:13 UTC" in _texts(final)
    assert len({b["block_id"] for b in final}) == len(final)
    assert [Block.parse(b).to_dict() for b in final] == final  # type: ignore[union-attr]


def test_a_decision_on_a_diagnosis_and_in_chinese(
    capacity_zero: Callable[[Lang], tuple[Diagnosis, ClusterFacts]],
) -> None:
    d, facts = capacity_zero(Lang.ZH)
    expired = decision_text(_request(facts, Action.CORDON), "expired", [], NOW, Lang.ZH)
    assert expired == "⌛ cordon gpu-a2 已于 03:00 UTC 过期"
    approved = decision_text(
        _request(facts, Action.DRAIN), "approved", ["U1", "U2", "W3"], NOW, Lang.ZH
    )
    assert approved == "✅ drain gpu-a2 已由 <@U1>、<@U2> 和 <@W3> 于 03:00 UTC 批准"
    after = _posted(decided_blocks(d, approved))
    [note] = [b for b in after if b["block_id"].startswith("gpubot.decision.")]
    assert after[after.index(note) + 1]["block_id"] == INCIDENT_BLOCK_ID
    assert note["text"]["text"] == approved


def test_the_message_as_slack_receives_it_through_the_real_client(
    capacity_zero: Callable[[Lang], tuple[Diagnosis, ClusterFacts]],
) -> None:
    d, facts = capacity_zero(Lang.EN)
    request = _request(facts, Action.CORDON, risk=RISK)
    with SlackDouble() as slack:
        client = WebClient(token=slack.token, base_url=slack.url, timeout=5)
        client.chat_postMessage(
            channel="C0GPU", text=fallback_text(d), blocks=diagnosis_blocks(d, [request])
        )
        [call] = slack.calls_to("chat.postMessage")
    assert call.ok  # the double's block validation (slack_sdk's and Slack's extra limits)
    received = call.params["blocks"]
    fields = [f["text"] for b in received if "fields" in b for f in b["fields"]]
    for answer in (d.questions.registered, d.questions.gpu_visible, d.questions.workloads):
        assert any(answer in f for f in fields)
    assert any(d.questions.scope in f for f in fields)
    assert "kubectl describe node gpu-a2" in json.dumps(received)
    actions = [(b["action_id"], b["value"]) for b in _buttons(received)]
    assert actions == [
        (APPROVE_ACTION, "req-1"),
        (DENY_ACTION, "req-1"),
        (SNOOZE_ACTION, "inc-42"),
        (TIMELINE_ACTION, "inc-42"),
    ]
    assert RISK in _buttons(received)[0]["confirm"]["text"]["text"]
    assert call.params["text"].startswith("🔴 CRITICAL · gpu-a2 (a100-east)")
