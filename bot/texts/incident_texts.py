"""The catalogue's part for incidents: why a request was withdrawn (as the store keeps it), what
the diagnosis pass and the leader's duties say in an incident's thread, and the names of
incident states and timeline kinds.

Why a part of its own: these follow an incident through its life, from the pass that opens
it to the resolve that ends it. What it must never do: change the English of a
`withdrawal.*` sentence (the store keeps it in English and reads it back by its template), or
import anything but the shared nouns: `bot.texts` assembles it.
"""

from __future__ import annotations

from bot.model import Lang

EN, ZH = Lang.EN, Lang.ZH

TEXTS: dict[str, dict[Lang, str]] = {
    # -- why a request will never act, as the store keeps it (`bot.incidents.lifecycle`) --
    "withdrawal.resolved": {
        EN: "incident {incident} was resolved at {when}",
        ZH: "事件 {incident} 已于 {when} 解决",
    },
    "withdrawal.resolved_why": {
        EN: "incident {incident} was resolved at {when}: {why}",
        ZH: "事件 {incident} 已于 {when} 解决：{why}",
    },
    "withdrawal.superseded": {
        EN: "incident {incident} was superseded at {when} by a better diagnosis: {rule} "
        "({title}), replacing {previous}",
        ZH: "事件 {incident} 已于 {when} 被更准确的诊断 {rule}（{title}）取代，替换了 {previous}",
    },
    # -- the diagnosis pass and the leader's duties: the thread ----------------------------
    "pass.superseded_by": {EN: "superseded by {rule}", ZH: "已被 {rule} 取代"},
    "pass.superseded": {
        EN: "a better diagnosis of the same problem: {old} → {rule} ({title}); the earlier "
        "proposals are withdrawn",
        ZH: "同一问题有了更准确的诊断：{old} → {rule}（{title}）；之前的建议已撤回",
    },
    "pass.came_back": {
        EN: "came back (reopened {n}×): {title}",
        ZH: "问题再次出现（第 {n} 次重开）：{title}",
    },
    "pass.held": {
        EN: "proposals held until {until} UTC: the alert that says why usually follows within "
        "{settle_s} s; if nothing better comes, they are proposed then",
        ZH: "建议暂缓到 {until} UTC：说明原因的告警通常在 {settle_s} 秒内到达；"
        "若没有更准确的诊断，届时再提出",
    },
    "pass.released": {
        EN: "no better diagnosis came within {settle_s} s: proposing now",
        ZH: "{settle_s} 秒内没有更准确的诊断：现在提出建议",
    },
    "pass.part_of": {
        EN: "part of pool-wide incident {id} ({rule}, pool {pool})",
        ZH: "属于节点池范围的事件 {id}（{rule}，节点池 {pool}）",
    },
    "pass.still_matches": {
        EN: "its alert resolved, but {rule} still matches: the incident stays open",
        ZH: "告警已恢复，但 {rule} 仍然匹配：事件保持未解决",
    },
    "pass.gone": {
        EN: "{rule} no longer matches: the symptom has been gone since {since} UTC",
        ZH: "{rule} 不再匹配：症状自 {since} UTC 起已消失",
    },
    "pass.resolved": {EN: "resolved: {why}", ZH: "已解决：{why}"},
    "duty.repaired": {
        EN: "repaired: the health gate passes for {node}; put it back into service?",
        ZH: "已修复：{node} 的健康门禁通过；是否恢复服务？",
    },
    "duty.repaired_failing": {
        EN: "repaired, but the health gate still fails for {node}: {blocking}. The uncordon is "
        "offered once it passes",
        ZH: "已修复，但 {node} 的健康门禁仍未通过：{blocking}。通过后会提出 uncordon",
    },
    "duty.expired": {
        EN: "every proposal expired without a decision",
        ZH: "所有建议都已过期，无人决定",
    },
    "duty.expired_ask": {
        EN: "the proposals expired without a decision; ask again with /gpubot",
        ZH: "建议已过期，无人决定；可用 /gpubot 重新提出",
    },
    # -- incident states and timeline entry kinds, as a person reads them (the code after
    # the dot is the value the store keeps)
    "state.open": {EN: "open", ZH: "待处理"},
    "state.diagnosed": {EN: "diagnosed", ZH: "已诊断"},
    "state.awaiting_approval": {EN: "awaiting approval", ZH: "等待审批"},
    "state.approved": {EN: "approved", ZH: "已批准"},
    "state.denied": {EN: "denied", ZH: "已拒绝"},
    "state.expired": {EN: "expired", ZH: "已过期"},
    "state.executing": {EN: "executing", ZH: "执行中"},
    "state.succeeded": {EN: "succeeded", ZH: "已成功"},
    "state.failed": {EN: "failed", ZH: "失败"},
    "state.resolved": {EN: "resolved", ZH: "已解决"},
    "kind.signal": {EN: "signal", ZH: "信号"},
    "kind.diagnosis": {EN: "diagnosis", ZH: "诊断"},
    "kind.proposal": {EN: "proposal", ZH: "建议"},
    "kind.approval": {EN: "approval", ZH: "批准"},
    "kind.denial": {EN: "denial", ZH: "拒绝"},
    "kind.state": {EN: "state", ZH: "状态"},
    "kind.gate": {EN: "gate", ZH: "健康门禁"},
    "kind.action-start": {EN: "action-start", ZH: "开始执行"},
    "kind.action-progress": {EN: "action-progress", ZH: "执行进度"},
    "kind.action-result": {EN: "action-result", ZH: "执行结果"},
    "kind.note": {EN: "note", ZH: "备注"},
    "kind.resolve": {EN: "resolve", ZH: "解决"},
}
