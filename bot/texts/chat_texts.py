"""The catalogue's part for the chat's own words: a diagnosis message's labels and buttons, the
confirm dialogs, the console's prompt and request lines, the Slack slash command's answers,
and the timeline table's headers.

Why a part of its own: the chat adapters say these whatever happened, around the sentences
the other rooms give them. What it must never do: hold a sentence another room decides
(a gate verdict, an approval's judgement: those are in their rooms' parts, handed to the
chat already said), or import anything but the shared nouns: `bot.texts` assembles it.
"""

from __future__ import annotations

from bot.model import Lang

EN, ZH = Lang.EN, Lang.ZH

TEXTS: dict[str, dict[Lang, str]] = {
    # -- the console ----------------------------------------------------------------------
    "console.incident": {EN: "incident {id}", ZH: "事件 {id}"},
    "console.incident_in_thread": {
        EN: "incident {id} (in the thread of incident {under})",
        ZH: "事件 {id}（在事件 {under} 的讨论串中）",
    },
    "console.request_id": {EN: "request {id}", ZH: "请求 {id}"},
    "console.request": {
        EN: "request {id}, expires {time} UTC",
        ZH: "请求 {id}，{time} UTC 过期",
    },
    "console.risk": {EN: "risk: {risk}", ZH: "风险：{risk}"},
    "console.gate_overridden": {EN: " (health gate overridden)", ZH: "（忽略健康门禁）"},
    "console.approved_as": {
        EN: "approved by {who} (--approve-as)",
        ZH: "已由 {who} 批准（--approve-as）",
    },
    "console.ask": {
        EN: "approve {action} {node}? [y/n]",
        ZH: "批准对 {node} 执行 {action}？[y/n]",
    },
    "console.ask_again": {
        EN: "Answer y (approve) or n (deny).",
        ZH: "请回答 y（批准）或 n（拒绝）。",
    },
    "console.withdrawn": {
        EN: "request {id} withdrawn: {why}",
        ZH: "请求 {id} 已撤回：{why}",
    },
    "console.gate_item": {EN: "{mark} {name}: {reason}", ZH: "{mark} {name}：{reason}"},
    "console.gate_legend": {
        EN: "✓ passed  ✗ failed, required  ○ not passed, not required",
        ZH: "✓ 通过  ✗ 未通过（必需）  ○ 未通过（非必需）",
    },
    # -- the Slack slash command (`bot.chat.slack._command`) ------------------------------
    "slack.help": {
        EN: "*gpubot* — `{command} <subcommand>`\n"
        "• `status [NODE]` — open incidents, or one node's state\n"
        "• `incidents` — the open incidents\n"
        "• `timeline INCIDENT|NODE` — what happened, in order\n"
        "• `cordon NODE` · `drain NODE` · `uncordon NODE` — propose it; someone the policy names "
        "must approve it in the channel (not you, unless the policy allows)\n"
        "• `help` — this",
        ZH: "*gpubot* — `{command} <子命令>`\n"
        "• `status [NODE]` — 未解决的事件，或某个节点的状态\n"
        "• `incidents` — 未解决的事件\n"
        "• `timeline INCIDENT|NODE` — 按顺序列出发生了什么\n"
        "• `cordon NODE` · `drain NODE` · `uncordon NODE` — 提出该操作；须由审批策略指定的人"
        "在频道中批准（除非策略允许，否则不能是你自己）\n"
        "• `help` — 本帮助",
    },
    "slack.unknown": {EN: "Unknown subcommand {sub}.\n", ZH: "未知子命令 {sub}。\n"},
    "slack.failed": {EN: "Could not do that: {error}", ZH: "无法执行：{error}"},
    "slack.no_incidents": {EN: "No open incidents.", ZH: "没有未解决的事件。"},
    "slack.open_count": {
        EN: "{n} open incident(s): {counts}",
        ZH: "{n} 个未解决的事件：{counts}",
    },
    "slack.no_node": {EN: "No node {node} in the cluster.", ZH: "集群中没有节点 {node}。"},
    "slack.none": {EN: "none", ZH: "无"},
    "slack.no_pool": {EN: "no pool", ZH: "无节点池"},
    "slack.cordoned": {EN: "cordoned", ZH: "已 cordon"},
    "slack.schedulable": {EN: "schedulable", ZH: "可调度"},
    "slack.node": {
        EN: "*{node}* ({pool}): ready {ready}, {scheduling}, GPUs {gpus}, "
        "{pods} pod(s) a drain would move",
        ZH: "*{node}*（{pool}）：ready {ready}，{scheduling}，GPU {gpus}，"
        "drain 会迁移 {pods} 个 pod",
    },
    "slack.gate": {EN: "Health gate: {failing}", ZH: "健康门禁：{failing}"},
    "slack.node_incident": {
        EN: "• incident {id} {rule} {state}: {title}",
        ZH: "• 事件 {id} {rule} {state}：{title}",
    },
    "slack.cluster": {EN: "cluster", ZH: "集群"},
    "slack.incident_row": {
        EN: "• {id} · {where} · {rule} · {state} · since {since} UTC",
        ZH: "• {id} · {where} · {rule} · {state} · 自 {since} UTC 起",
    },
    "slack.more": {EN: "\n… and {n} more", ZH: "\n… 还有 {n} 个"},
    "slack.open_list": {EN: "{n} open incident(s):\n", ZH: "{n} 个未解决的事件：\n"},
    "slack.no_incident": {
        EN: "No incident {arg}, nor one for a node of that name.",
        ZH: "没有事件 {arg}，也没有该名称节点的事件。",
    },
    "slack.timeline": {EN: "timeline of incident {id}", ZH: "事件 {id} 的时间线"},
    "slack.proposed": {
        EN: "Proposed *{action} {node}* as request {id} in <#{channel}>. Someone the approval "
        "policy names must approve it (not you, unless the policy allows); it expires at "
        "{expires} UTC.",
        ZH: "已在 <#{channel}> 提出 *{action} {node}*，请求 {id}。须由审批策略指定的人批准"
        "（除非策略允许，否则不能是你自己）；将于 {expires} UTC 过期。",
    },
    "slack.timeline_title": {EN: "timeline", ZH: "时间线"},
    "slack.needs_approver": {EN: "{what}: needs an approver", ZH: "{what}：需要审批人"},
    "slack.asks": {EN: "🛠 {who} asks to *{what}*", ZH: "🛠 {who} 请求 *{what}*"},
    "slack.asks_incident": {EN: " (incident {id}: {title})", ZH: "（事件 {id}：{title}）"},
    "slack.denied_reason": {EN: "denied in Slack", ZH: "在 Slack 中拒绝"},
    "slack.recorded": {
        EN: "Your approval is recorded: {message}",
        ZH: "你的批准已记录：{message}",
    },
    "slack.votes_second": {
        EN: "{votes} of {needed} approvals: {voters}; needs a second approver",
        ZH: "已有 {votes}/{needed} 个批准：{voters}；还需要第二位审批人",
    },
    "slack.votes_one_more": {
        EN: "{votes} of {needed} approvals: {voters}; needs {missing} more approver",
        ZH: "已有 {votes}/{needed} 个批准：{voters}；还需要 {missing} 位审批人",
    },
    "slack.votes_more": {
        EN: "{votes} of {needed} approvals: {voters}; needs {missing} more approvers",
        ZH: "已有 {votes}/{needed} 个批准：{voters}；还需要 {missing} 位审批人",
    },
    "slack.snoozed_note": {
        EN: "snoozed by {who} until {until} UTC: thread updates muted",
        ZH: "{who} 已静音至 {until} UTC：暂停线程更新",
    },
    "slack.snoozed": {
        EN: "Snoozed incident {id} until {until} UTC: its thread stays quiet (the timeline keeps "
        "everything). Approving or denying ends the snooze.",
        ZH: "事件 {id} 已静音至 {until} UTC：其线程保持安静（时间线仍记录一切）。"
        "批准或拒绝会结束静音。",
    },
    "slack.timeline_head": {
        EN: "*Timeline of incident {id}* · {node} · {rule} · {state}",
        ZH: "*事件 {id} 的时间线* · {node} · {rule} · {state}",
    },
    "slack.timeline_dropped": {
        EN: "… {n} earlier entries: `gpubot timeline {id}`",
        ZH: "… 更早的 {n} 条记录：`gpubot timeline {id}`",
    },
    "slack.timeline_empty": {EN: "(empty)", ZH: "（空）"},
    "timeline.when": {EN: "when (UTC)", ZH: "时间（UTC）"},
    "timeline.who": {EN: "who", ZH: "谁"},
    "timeline.what": {EN: "what", ZH: "类型"},
    "timeline.text": {EN: "details", ZH: "内容"},
    # -- a diagnosis as the console and Slack show it (`bot.chat.console`, `bot.chat.blocks`):
    # its labels, and the severity names (the code after the dot is the `Severity` value)
    "message.registered": {EN: "Registered?", ZH: "节点注册了吗？"},
    "message.gpu_visible": {EN: "GPUs visible?", ZH: "GPU 被调度器看见了吗？"},
    "message.workloads": {EN: "Why didn't workloads go?", ZH: "工作负载为什么没走？"},
    "message.scope": {EN: "How wide?", ZH: "变更范围多大？"},
    "message.stage": {EN: "stage", ZH: "阶段"},
    "message.evidence": {EN: "Evidence", ZH: "证据"},
    "message.blockers": {EN: "Blockers", ZH: "阻塞项"},
    "message.check_first": {EN: "Check first", ZH: "先查"},
    "message.runbook": {EN: "Runbook", ZH: "处置步骤"},
    "message.rollback": {EN: "Rollback", ZH: "回滚"},
    "message.proposals": {EN: "Proposed", ZH: "建议操作"},
    "message.approval": {EN: "needs approval", ZH: "需审批"},
    "message.none": {EN: "no action: observe", ZH: "无操作：继续观察"},
    "message.healthy": {
        EN: "No diagnosis: nothing in the snapshot matches a rule.",
        ZH: "无诊断：快照中没有匹配任何规则的问题。",
    },
    "message.more": {EN: "… {n} more in the timeline", ZH: "… 另有 {n} 条，见时间线"},
    "message.many": {
        EN: "{n} diagnoses, shown as Markdown (up to {max} are drawn as panels)",
        ZH: "共 {n} 条诊断，以 Markdown 显示（不超过 {max} 条时以面板显示）",
    },
    "severity.critical": {EN: "CRITICAL", ZH: "严重"},
    "severity.warning": {EN: "WARNING", ZH: "警告"},
    "severity.info": {EN: "INFO", ZH: "提示"},
    # -- the Slack message's own words (`bot.chat.blocks`): its subject, context, buttons, the
    # request line, the confirm dialog, and how a decided request reads where its buttons were
    "message.pool": {EN: "pool {pool}", ZH: "节点池 {pool}"},
    "message.cluster": {EN: "cluster", ZH: "集群"},
    "message.rule": {EN: "rule", ZH: "规则"},
    "message.expected": {EN: "expected while a change is in progress", ZH: "变更进行中的预期现象"},
    "message.approve": {EN: "Approve {action}", ZH: "批准 {action}"},
    "message.override": {EN: " (health gate failed)", ZH: "（健康门未通过）"},
    "message.deny": {EN: "Deny", ZH: "拒绝"},
    "message.snooze": {EN: "Snooze 1h", ZH: "静默 1 小时"},
    "message.timeline": {EN: "Timeline", ZH: "时间线"},
    "message.request": {
        EN: "{what} · requested by {who} · expires {time} UTC · request {id}",
        ZH: "{what} · 发起人 {who} · {time} UTC 过期 · 请求 {id}",
    },
    "message.confirm.title": {
        EN: "Approve {action} on {node}?",
        ZH: "批准对 {node} 执行 {action}？",
    },
    "message.confirm.ok": {EN: "Yes, {action}", ZH: "确认 {action}"},
    "message.confirm.no": {EN: "Cancel", ZH: "取消"},
    "message.confirm.cordon": {
        EN: "New pods will no longer be scheduled on {node}; pods already running stay.",
        ZH: "{node} 将不再调度新的 Pod；已在运行的 Pod 不受影响。",
    },
    "message.confirm.drain": {
        EN: "{node} is cordoned and its pods are evicted through the Eviction API, honouring "
        "PodDisruptionBudgets; DaemonSet pods stay.",
        ZH: "{node} 将被 cordon，其 Pod 通过 Eviction API 驱逐，遵守 PodDisruptionBudget；"
        "DaemonSet 的 Pod 保留。",
    },
    "message.confirm.force": {
        EN: "{node} is drained, and pods a PodDisruptionBudget protects are deleted directly "
        "(--force).",
        ZH: "{node} 将被 drain，受 PodDisruptionBudget 保护的 Pod 会被直接删除（--force）。",
    },
    "message.confirm.emptydir": {
        EN: " Their emptyDir data is lost.",
        ZH: "Pod 的 emptyDir 数据将丢失。",
    },
    "message.confirm.uncordon": {EN: "{node} takes pods again.", ZH: "{node} 将重新接收 Pod。"},
    "message.confirm.uncordon_anyway": {
        EN: "{node} takes pods again although the health gate did not pass.",
        ZH: "健康门未通过，{node} 仍将重新接收 Pod。",
    },
    "message.risk": {EN: "Risk: {risk}", ZH: "风险：{risk}"},
    "message.expires": {EN: "Expires {time} UTC.", ZH: "{time} UTC 过期。"},
    "message.decided.approved": {
        EN: "✅ {what} approved by {who} at {time} UTC",
        ZH: "✅ {what} 已由 {who} 于 {time} UTC 批准",
    },
    "message.decided.denied": {
        EN: "🚫 {what} denied by {who} at {time} UTC",
        ZH: "🚫 {what} 已由 {who} 于 {time} UTC 拒绝",
    },
    "message.decided.expired": {
        EN: "⌛ {what} expired at {time} UTC",
        ZH: "⌛ {what} 已于 {time} UTC 过期",
    },
}
