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
    # -- the daily digest (`bot.incidents.digest`): spans, windows, the counts line, the nodes
    # still out of service and how they are out, repeat offenders, symptoms, recovery
    "digest.span.days": {EN: "{days}d {hours}h", ZH: "{days} 天 {hours} 小时"},
    "digest.span.hours": {EN: "{hours}h {minutes:02d}m", ZH: "{hours} 小时 {minutes} 分"},
    "digest.span.minutes": {EN: "{minutes}m {secs:02d}s", ZH: "{minutes} 分 {secs} 秒"},
    "digest.window.days": {EN: "Last {n} days", ZH: "过去 {n} 天"},
    "digest.window.hours": {EN: "Last {n} hours", ZH: "过去 {n} 小时"},
    "digest.window.hour": {EN: "Last hour", ZH: "过去 1 小时"},
    "digest.window.minutes": {EN: "Last {n} minutes", ZH: "过去 {n} 分钟"},
    "digest.counts": {
        EN: "{window}: {opened} opened, {resolved} resolved",
        ZH: "{window}：新开 {opened} 起，已解决 {resolved} 起",
    },
    "digest.counts.superseded": {EN: ", {superseded} superseded", ZH: "，被取代 {superseded} 起"},
    "digest.counts.reopened": {
        EN: "; {flapped} flapped, {reopened} reopen cycles",
        ZH: "；反复发作 {flapped} 起，重开 {reopened} 次",
    },
    "digest.counts.reopened_once": {
        EN: "; {flapped} flapped, {reopened} reopen cycle",
        ZH: "；反复发作 {flapped} 起，重开 {reopened} 次",
    },
    "digest.note.cordoned-by-gpubot": {EN: "cordoned by gpubot", ZH: "由 gpubot 封锁"},
    "digest.note.cordoned-by-hand": {EN: "cordoned by hand", ZH: "手动封锁"},
    "digest.note.not-ready": {EN: "not Ready", ZH: "未就绪"},
    "digest.note.no-incident": {EN: "no open incident", ZH: "无未解决的事件"},
    "digest.noted": {EN: "{rules} ({notes})", ZH: "{rules}（{notes}）"},
    "digest.from_timelines": {
        EN: "(Nodes out of service as far as the timelines show: the cluster was not read.)",
        ZH: "（下线节点仅依据事件时间线，未读取集群。）",
    },
    "digest.quiet_day": {
        EN: "{window}: quiet day: no incidents, every node in service.",
        ZH: "{window}：平安无事，没有事件，所有节点都在正常服务。",
    },
    "digest.all_quiet": {
        EN: "{window}: all quiet: no incidents, every node in service.",
        ZH: "{window}：平安无事，没有事件，所有节点都在正常服务。",
    },
    "digest.still_out": {
        EN: "Still out of service ({count}):",
        ZH: "仍处于下线状态的节点（{count} 个）：",
    },
    "digest.since_unknown": {EN: "since unknown", ZH: "起始时间不明"},
    "digest.since": {EN: "since {shown} ({lasted})", ZH: "自 {shown} 起（已 {lasted}）"},
    "digest.none_out": {EN: "No node out of service", ZH: "没有节点处于下线状态"},
    "digest.offender": {EN: "{node} ({count}×)", ZH: "{node}（{count} 次）"},
    "digest.offenders": {EN: "Repeat offenders: {nodes}", ZH: "反复出问题的节点：{nodes}"},
    "digest.top": {EN: "Most frequent symptoms:", ZH: "最常见的症状："},
    "digest.median_none": {
        EN: "Median time to recover: none resolved",
        ZH: "恢复时间中位数：无（没有已解决的事件）",
    },
    "digest.median": {
        EN: "Median time to recover: {median} (over {resolved} resolved)",
        ZH: "恢复时间中位数：{median}（共 {resolved} 起已解决）",
    },
    # -- an incident's summary when it resolves (`bot.incidents.summary`)
    "summary.duration": {EN: "Duration", ZH: "持续时间"},
    "summary.reopened": {EN: "Reopened", ZH: "重开"},
    "summary.seen": {EN: "Seen", ZH: "观察到"},
    "summary.decided": {EN: "Decided", ZH: "决策"},
    "summary.done": {EN: "Done", ZH: "已执行"},
    "summary.outcome": {EN: "Outcome", ZH: "结果"},
    "summary.to_approve": {EN: "Time to approve", ZH: "审批耗时"},
    "summary.to_recover": {EN: "Time to recover", ZH: "恢复耗时"},
    "summary.open": {EN: "still open", ZH: "仍未解决"},
    "summary.none": {EN: "none", ZH: "无"},
    "summary.once": {EN: "once", ZH: "1 次"},
    "summary.times": {EN: "{n} times", ZH: "{n} 次"},
    "summary.ended": {EN: "{state}: {reason}", ZH: "{state}：{reason}"},
    # -- notices about alerts no incident can hold (`bot.pipeline.notices`)
    "notice.firing": {EN: "firing", ZH: "触发中"},
    "notice.resolved": {EN: "resolved", ZH: "已恢复"},
    "notice.nodeless": {
        EN: "alert {name} ({status}) names no node: node unknown, so no incident is opened for "
        "it. Its labels: {labels}",
        ZH: "告警 {name}（{status}）未指明节点：节点未知，不会为它创建事件。它的标签：{labels}",
    },
    "notice.nodeless_many": {
        EN: "{count} alerts of Alertmanager group {group} name no node ({firing} firing, "
        "{resolved} resolved): node unknown, so no incident is opened for them. By name: "
        "{counted}. Labels of the first, {first}: {labels}",
        ZH: "Alertmanager 分组 {group} 中有 {count} 条告警未指明节点（{firing} 条触发中，"
        "{resolved} 条已恢复）：节点未知，不会为它们创建事件。按名称：{counted}。第一条 "
        "{first} 的标签：{labels}",
    },
    "notice.absent": {
        EN: "{count} firing alert(s) of Alertmanager group {group} name nodes the cluster does "
        "not have, so no incident is opened and nothing is proposed for them. By name: "
        "{counted}. Nodes:",
        ZH: "Alertmanager 分组 {group} 中有 {count} 条触发中的告警提到集群中没有的节点，"
        "因此不会为它们创建事件，也不提议任何操作。按名称：{counted}。节点：",
    },
    "notice.more_nodes": {EN: "and {more} more node(s)", ZH: "另有 {more} 个节点"},
    "notice.more_name": {EN: ", and {more} more name", ZH: "，另有 {more} 个告警名"},
    "notice.more_names": {EN: ", and {more} more names", ZH: "，另有 {more} 个告警名"},
    "notice.truncated": {
        EN: "Alertmanager truncated {count} alert(s) of group {group}: raise max_alerts or look "
        "in Alertmanager",
        ZH: "Alertmanager 截断了分组 {group} 的 {count} 条告警：请调大 max_alerts，或到 "
        "Alertmanager 中查看",
    },
    # -- a message revised when what blocks the drain changes (`bot.pipeline.told`)
    "told.updated": {EN: "updated: ", ZH: "已更新："},
    "told.gone": {EN: "no longer in the drain's way: {items}", ZH: "不再阻塞排空：{items}"},
    "told.new": {EN: "now in the drain's way: {items}", ZH: "新增阻塞排空：{items}"},
}
