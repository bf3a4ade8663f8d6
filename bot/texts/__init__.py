"""Every sentence gpubot says to a person outside a diagnosis, in English and Chinese: demo
scenes, proposals, the approval prompt, the health gate, action results, timeline headers,
stage and state names.

Why one catalogue: `--lang zh` was half English because each module kept its own strings,
some never translated. Here a key without both languages, or with different placeholders in
each, fails `tests/unit/test_texts.py`. Rule texts (titles, runbook steps) are not here: the
rule files carry both languages and `gpubot rules lint` checks them.

What it must never do: be branched on. Code decides on codes (an outcome, an enum) and only
then renders a sentence; a rendered sentence changes with the language.
"""

from __future__ import annotations

import re
from string import Formatter

from bot.model import IncidentState, Lang, Stage

EN, ZH = Lang.EN, Lang.ZH

TEXTS: dict[str, dict[Lang, str]] = {
    # -- the demo's scenes --------------------------------------------------------------
    "demo.fault.xid": {
        EN: "GPU {gpu} of {node} falls off the bus (Xid {code})",
        ZH: "{node} 的 GPU {gpu} 从总线上脱落（Xid {code}）",
    },
    "demo.fault.plugin-crashloop": {
        EN: "the device plugin on {node} starts crash-looping",
        ZH: "{node} 上的 device plugin 开始反复崩溃",
    },
    "demo.fault.zero-capacity": {
        EN: "{node} reports zero allocatable GPUs",
        ZH: "{node} 上报的可分配 GPU 为零",
    },
    "demo.take_out": {
        EN: "gpubot proposes taking {node} out of service",
        ZH: "gpubot 建议让 {node} 退出服务",
    },
    "demo.cordon": {
        EN: "gpubot proposes cordoning {node} until it is fixed",
        ZH: "gpubot 建议在修复前 cordon {node}",
    },
    "demo.repair": {
        EN: "repair: {node} is rebooted and its GPU reset",
        ZH: "修复：重启 {node}，重置其 GPU",
    },
    "demo.repaired": {
        EN: "{node} rebooted: Ready {ready}, {gpus} of {count} GPUs allocatable, "
        "Xid alerts resolved: {resolved}",
        ZH: "{node} 已重启：Ready {ready}，可分配 GPU {gpus}/{count}，"
        "已恢复的 Xid 告警：{resolved}",
    },
    "demo.gate": {
        EN: "health gate for {node} (runbook step 9)",
        ZH: "{node} 的健康门禁（处置手册第 9 步）",
    },
    "demo.nobody": {
        EN: "Nobody can approve here (no terminal, no --approve-as): {action} {node} is not run. "
        "Run `gpubot demo --approve-as NAME` to approve as NAME, or run it in a terminal to be "
        "asked; the demo's requests live only as long as the demo (unless --store-url).",
        ZH: "这里没有人能审批（不是终端，也没有 --approve-as）：不执行 {action} {node}。"
        "运行 `gpubot demo --approve-as NAME` 以 NAME 的身份审批，或在终端里运行以便被询问；"
        "演示的请求只在演示期间存在（除非指定 --store-url）。",
    },
    "demo.denied": {
        EN: "{action} {node} denied: the node stays as it is, and the incident stays open",
        ZH: "已拒绝 {action} {node}：节点保持现状，事件仍未解决",
    },
    "demo.resolved": {
        EN: "incident {id} resolved — {node}",
        ZH: "事件 {id} 已解决 — {node}",
    },
    "demo.open": {
        EN: "incident {id} still open — {node}",
        ZH: "事件 {id} 仍未解决 — {node}",
    },
    "demo.back": {EN: "{node} back in service", ZH: "{node} 已恢复服务"},
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
    # -- the health gate's items (`bot.gate.items`) --------------------------------------
    "gate.line": {EN: "{name}: {reason}", ZH: "{name}：{reason}"},
    "gate.separator": {EN: "; ", ZH: "；"},
    "gate.name.node-ready": {EN: "node-ready", ZH: "节点就绪"},
    "gate.name.gpus-allocatable": {EN: "gpus-allocatable", ZH: "GPU 可分配"},
    "gate.name.driver-consistent": {EN: "driver-consistent", ZH: "驱动一致"},
    "gate.name.mig-state": {EN: "mig-state", ZH: "MIG 配置"},
    "gate.name.driver-upgrade": {EN: "driver-upgrade", ZH: "驱动升级"},
    "gate.name.gpu-operator-pods": {EN: "gpu-operator-pods", ZH: "GPU Operator 组件"},
    "gate.name.gpu-errors": {EN: "gpu-errors", ZH: "GPU 错误告警"},
    "gate.name.no-new-gpu-errors": {EN: "no-new-gpu-errors", ZH: "无新 GPU 错误"},
    "gate.name.dcgm-diag": {EN: "dcgm-diag", ZH: "DCGM 诊断"},
    "gate.name.nccl-tests": {EN: "nccl-tests", ZH: "nccl-tests 测试"},
    "gate.name.gpu-smoke-test": {EN: "gpu-smoke-test", ZH: "GPU 冒烟测试"},
    "gate.not_ready": {EN: "node Ready={ready}", ZH: "节点未就绪（Ready={ready}）"},
    "gate.pressure": {EN: "Ready, but {pressure}", ZH: "已就绪，但有 {pressure}"},
    "gate.ready": {EN: "Ready, no pressure conditions", ZH: "已就绪，无资源压力"},
    "gate.no_gpu_facts": {EN: "no GPU facts for the node", ZH: "没有该节点的 GPU 信息"},
    "gate.mig_nothing": {
        EN: "MIG config {config} offers nothing",
        ZH: "MIG 配置 {config} 没有提供任何设备",
    },
    "gate.mig_offered": {EN: "MIG layout {config} offered", ZH: "已提供 MIG 布局 {config}"},
    "gate.no_gpu": {EN: "the node offers no GPU", ZH: "节点没有提供 GPU"},
    "gate.allocatable": {
        EN: "{gpus} of {count} GPUs allocatable",
        ZH: "可分配 GPU {gpus}/{count}",
    },
    "gate.no_driver": {EN: "no driver version label", ZH: "没有驱动版本标签"},
    "gate.driver": {EN: "driver {version}", ZH: "驱动 {version}"},
    "gate.driver_ahead": {
        EN: "driver {version}: upgraded; the pool's rolling upgrade goes on",
        ZH: "驱动 {version}：已升级；节点池的滚动升级仍在进行",
    },
    "gate.driver_adrift": {
        EN: "driver {version}, pool {pool} mostly runs {common}",
        ZH: "驱动 {version}，而节点池 {pool} 大多运行 {common}",
    },
    "gate.driver_as_pool": {
        EN: "driver {version}, as the pool",
        ZH: "驱动 {version}，与节点池一致",
    },
    "gate.mig_unused": {EN: "MIG not used", ZH: "未使用 MIG"},
    "gate.mig_pending": {
        EN: "MIG config {config}: nvidia.com/mig.config.state={state}",
        ZH: "MIG 配置 {config} 未生效：nvidia.com/mig.config.state={state}",
    },
    "gate.mig_applied": {EN: "MIG config {config} applied", ZH: "MIG 配置 {config} 已生效"},
    "gate.upgrading": {
        EN: "driver upgrade state={state}",
        ZH: "驱动升级进行中（state={state}）",
    },
    "gate.no_upgrade": {EN: "no driver upgrade under way", ZH: "没有进行中的驱动升级"},
    "gate.component_failing": {
        EN: "{component} failing ({why})",
        ZH: "{component} 异常（{why}）",
    },
    "gate.component_down": {
        EN: "{component} failing (not running)",
        ZH: "{component} 异常（未运行）",
    },
    "gate.component_missing": {
        EN: "{component} missing (no pod on the node)",
        ZH: "{component} 缺失（节点上没有它的 pod）",
    },
    "gate.operator_runs": {
        EN: "every GPU Operator pod of the node runs",
        ZH: "节点上的 GPU Operator pod 全部在运行",
    },
    "gate.xid": {EN: "Xid {code}", ZH: "Xid {code} 错误"},
    "gate.xid_on": {EN: "Xid {code} on GPU {gpu}", ZH: "GPU {gpu} 上的 Xid {code} 错误"},
    "gate.no_gpu_alert": {EN: "no GPU error alert firing", ZH: "没有正在触发的 GPU 错误告警"},
    "gate.no_prometheus": {
        EN: "no Prometheus evidence for the window",
        ZH: "观察窗口内没有 Prometheus 数据",
    },
    "gate.new_errors_until": {
        EN: "{errors} (out of the window by {by} UTC if no new error comes)",
        ZH: "{errors}（若无新错误，将于 {by} UTC 移出观察窗口）",
    },
    "gate.no_new_errors": {
        EN: "no Xid, ECC or NVLink errors in the window",
        ZH: "观察窗口内没有 Xid、ECC 或 NVLink 错误",
    },
    "gate.unknown": {EN: "not reported", ZH: "未上报"},
    "gate.pass": {EN: "passed", ZH: "通过"},
    "gate.fail": {EN: "failed", ZH: "未通过"},
    "gate.not_run": {EN: "not run", ZH: "未运行"},
    # -- the GPU smoke test's findings (`bot.gate.smoke_test`); blanks hold what
    # Kubernetes and nvidia-smi said, as they said it
    "smoke.no_count": {
        EN: "no GPU count to test against",
        ZH: "没有可对照的 GPU 数量",
    },
    "smoke.not_created": {
        EN: "smoke-test pod not created: {error}",
        ZH: "未能创建冒烟测试 Pod：{error}",
    },
    "smoke.deleted": {EN: "the smoke-test pod was deleted", ZH: "冒烟测试 Pod 已被删除"},
    "smoke.timed_out": {
        EN: "the smoke-test pod did not finish within {seconds}s: {state}",
        ZH: "冒烟测试 Pod 未在 {seconds} 秒内结束：{state}",
    },
    "smoke.timed_out_read": {
        EN: "the smoke-test pod did not finish within {seconds}s: {state}; last read failed: "
        "{error}",
        ZH: "冒烟测试 Pod 未在 {seconds} 秒内结束：{state}；最后一次读取失败：{error}",
    },
    "smoke.passed": {
        EN: "nvidia-smi -L listed all {count} GPUs ({models})",
        ZH: "nvidia-smi -L 列出了全部 {count} 块 GPU（{models}）",
    },
    "smoke.missing": {
        EN: "nvidia-smi -L listed {listed} of {count} GPUs, missing GPU {missing}; exit code "
        "{code}",
        ZH: "nvidia-smi -L 只列出 {count} 块 GPU 中的 {listed} 块，缺少 GPU {missing}；退出码 "
        "{code}",
    },
    "smoke.missing_said": {
        EN: "nvidia-smi -L listed {listed} of {count} GPUs, missing GPU {missing}; exit code "
        "{code}; {output}",
        ZH: "nvidia-smi -L 只列出 {count} 块 GPU 中的 {listed} 块，缺少 GPU {missing}；退出码 "
        "{code}；{output}",
    },
    "smoke.exit_said": {EN: "exit code {code}; {output}", ZH: "退出码 {code}；{output}"},
    "gate.smoke_missing": {
        EN: "nvidia-smi -L listed {listed} of the node's {count} GPUs, missing GPU {missing}",
        ZH: "nvidia-smi -L 只列出节点 {count} 块 GPU 中的 {listed} 块，缺少 GPU {missing}",
    },
    # -- the approval policy's judgement (`bot.approval.policy.decide`) ------------------
    "approval.what": {EN: "{action} on {node}", ZH: "对 {node} 的 {action}"},
    "approval.expired": {
        EN: "this request expired at {at} UTC; ask again",
        ZH: "该请求已于 {at} UTC 过期；请重新发起",
    },
    "approval.not_allowed": {
        EN: "you are not allowed to approve {what} (needs: {who})",
        ZH: "你无权批准{what}（需要：{who}）",
    },
    "approval.self": {
        EN: "you asked for {what}; someone else must approve it",
        ZH: "{what} 是你发起的；必须由其他人批准",
    },
    "approval.again": {
        EN: "you already approved {what}; it needs a different second approver",
        ZH: "你已批准过{what}；还需要另一位审批人",
    },
    "approval.second": {EN: "{what} needs a second approver", ZH: "{what} 还需要第二位审批人"},
    "decide.refused": {
        EN: "approval by {who} refused: {why}",
        ZH: "{who} 的批准被拒绝：{why}",
    },
    "decide.no_such_request": {EN: "no such request", ZH: "没有这个请求"},
    "decide.denial_refused": {
        EN: "denial by {who} refused: {why}",
        ZH: "{who} 的拒绝被驳回：{why}",
    },
    "decide.denied_outcome": {EN: "{command} denied by {who}", ZH: "{who} 拒绝了 {command}"},
    "decide.already_denied": {EN: "already denied by {who}", ZH: "已被 {who} 拒绝"},
    "decide.already_decided": {
        EN: "already decided and acted on",
        ZH: "已有决定，且已执行",
    },
    "decide.no_longer_valid": {
        EN: "this request is no longer valid: {why}",
        ZH: "该请求已失效：{why}",
    },
    "decide.denied_before": {EN: "{who} denied this: {detail}", ZH: "{who} 已拒绝：{detail}"},
    "decide.no_reason": {EN: "no reason given", ZH: "未说明理由"},
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
    "decide.voted_before": {EN: "{who} already approved this", ZH: "{who} 已经批准过了"},
    "exec.leader_runs_it": {EN: "{message}; the leader runs it", ZH: "{message}；由主副本执行"},
    "exec.already_executed": {EN: "already executed{state}", ZH: "已执行过{state}"},
    "approval.approved": {EN: "{what} approved by {who}", ZH: "{what} 已由 {who} 批准"},
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
    "slack.list_separator": {EN: ", ", ZH: "，"},
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
    # -- a request's risk ----------------------------------------------------------------------
    "risk.no_checkpoint": {
        EN: "{who} (no checkpoint recorded)",
        ZH: "{who}（没有 checkpoint 记录）",
    },
    "risk.last": {EN: "{who} (last {minutes} min ago)", ZH: "{who}（上次在 {minutes} 分钟前）"},
    "risk.pod": {
        EN: "{n} GPU pod without a checkpoint in the last {minutes} min will lose progress: {pods}",
        ZH: "{n} 个 GPU Pod 最近 {minutes} 分钟没有 checkpoint，进度将丢失：{pods}",
    },
    "risk.pods": {
        EN: "{n} GPU pods without a checkpoint in the last {minutes} min will lose progress: "
        "{pods}",
        ZH: "{n} 个 GPU Pod 最近 {minutes} 分钟没有 checkpoint，进度将丢失：{pods}",
    },
    "risk.cordon": {
        EN: "Cordon evicts nothing. If a drain follows: {risk}",
        ZH: "cordon 不驱逐任何 Pod。若随后 drain：{risk}",
    },
    "risk.override": {
        EN: "The health gate did not pass ({failing}): the node goes back into service anyway.",
        ZH: "健康门禁未通过（{failing}）：节点仍将恢复服务。",
    },
    "risk.see_timeline": {EN: "see the timeline", ZH: "见时间线"},
    # -- the executor: what the timeline and the thread say ----------------------------------
    "exec.proposed": {EN: "proposed: {command}", ZH: "建议：{command}"},
    "exec.risk": {EN: " — risk: {risk}", ZH: " — 风险：{risk}"},
    "exec.drain_flags": {
        EN: " (--ignore-daemonsets: DaemonSet pods such as the GPU Operator's stay, as kubectl "
        "does; no --delete-emptydir-data: a pod with emptyDir data stops the drain and is named, "
        "so local data is only deleted after someone checks checkpoints and logs and asks for "
        "it, as runbook step 3 says)",
        ZH: "（--ignore-daemonsets：GPU Operator 等 DaemonSet 的 Pod 保留，与 kubectl 相同；"
        "不带 --delete-emptydir-data：有 emptyDir 数据的 Pod 会让 drain 停下并被点名，"
        "本地数据只在有人确认 checkpoint 和日志后明确要求时才删除，见处置手册第 3 步）",
    },
    "decide.approved": {EN: "{who} approved {command}", ZH: "{who} 批准了 {command}"},
    "decide.approved_state": {
        EN: "{action} on {node} approved by {who}",
        ZH: "{node} 的 {action} 已由 {who} 批准",
    },
    "budget.refused": {
        EN: "blast radius: pool {pool} may have {budget} of {members} nodes out of service at "
        "once; out now: {out}",
        ZH: "影响范围：节点池 {pool} 的 {members} 个节点中同时最多 {budget} 个可退出服务；"
        "当前已退出：{out}",
    },
    "exec.waiting": {
        EN: "not run: {why}. It is offered again, with new buttons, once that clears",
        ZH: "未执行：{why}。条件解除后会重新提出，并附新的按钮",
    },
    "decide.denied": {EN: "{who} denied {command}", ZH: "{who} 拒绝了 {command}"},
    "decide.denied_by": {EN: "denied by {who}", ZH: "被 {who} 拒绝"},
    "decide.because": {EN: ": {reason}", ZH: "：{reason}"},
    "exec.drain_flags_emptydir": {
        EN: " (--ignore-daemonsets: DaemonSet pods such as the GPU Operator's stay, as kubectl "
        "does; --delete-emptydir-data, as asked: the pods' emptyDir data on the node is deleted)",
        ZH: "（--ignore-daemonsets：GPU Operator 等 DaemonSet 的 Pod 保留，与 kubectl 相同；"
        "按要求带 --delete-emptydir-data：节点上 Pod 的 emptyDir 数据将被删除）",
    },
    "exec.dry_run": {
        EN: "dry-run: would have run `{command}`",
        ZH: "演练模式：未执行，实际会运行 `{command}`",
    },
    "exec.expired_at": {EN: "the request expired at {at}", ZH: "请求已于 {at} 过期"},
    "exec.no_approval": {
        EN: "no recorded approval allows this",
        ZH: "没有已记录的批准允许此操作",
    },
    "exec.running_here": {EN: "already running here", ZH: "本副本已在执行"},
    "exec.state.approved": {EN: "approved by {who}", ZH: "已由 {who} 批准"},
    "exec.unreadable": {EN: "could not read {node}: {error}", ZH: "无法读取 {node}：{error}"},
    "exec.gone": {EN: "node {node} is gone", ZH: "节点 {node} 已不存在"},
    "exec.failed": {EN: "{command} failed: {error}", ZH: "{command} 失败：{error}"},
    "exec.gave_way": {
        EN: "stopped: another gpubot took `{command}` over",
        ZH: "已停止：另一个 gpubot 接管了 `{command}`",
    },
    "exec.changed_facts": {EN: "the node's facts", ZH: "节点的状况"},
    "exec.changed": {
        EN: "the node changed since the approval: {changed}",
        ZH: "批准后节点有变化：{changed}",
    },
    "exec.changed_ask_again": {
        EN: "not run: {node} changed since the approval ({changed}); asking again as {id}",
        ZH: "未执行：批准后 {node} 有变化（{changed}）；以请求 {id} 重新请求审批",
    },
    "exec.reoffer.room": {EN: "the pool has room now ({why})", ZH: "节点池现在有余量（{why}）"},
    "exec.reoffer.gate": {EN: "the health gate passes now", ZH: "健康门禁现已通过"},
    "exec.resume.no_approval": {
        EN: "no recorded approval allows this: nothing was done",
        ZH: "没有已记录的批准允许此操作：未做任何事",
    },
    "exec.resume.expired": {
        EN: "the request expired before it acted ({at})",
        ZH: "请求在执行前已过期（{at}）",
    },
    "exec.resume.from_checks": {
        EN: "running `{command}` again from its checks: {who} stopped before acting",
        ZH: "从检查开始重新执行 `{command}`：{who} 在动手前已停止",
    },
    "exec.resume.resuming": {
        EN: "resuming `{command}` after a restart (started {at} by {who})",
        ZH: "重启后继续执行 `{command}`（{who} 于 {at} 开始）",
    },
    "exec.resume.failed": {
        EN: "{command} failed on resume: {error}",
        ZH: "继续执行时 {command} 失败：{error}",
    },
    "exec.gate.passed": {EN: "health gate passed for {node}", ZH: "{node} 的健康门禁通过"},
    "exec.gate.failed": {EN: "health gate failed for {node}", ZH: "{node} 的健康门禁未通过"},
    "exec.gate.failing": {EN: " ({failing})", ZH: "（{failing}）"},
    "exec.state.waiting": {EN: "waiting: {why}", ZH: "等待中：{why}"},
    "exec.state.repaired": {EN: "repaired: gate passed", ZH: "已修复：健康门禁通过"},
    "exec.state.asking_again": {EN: "asking again", ZH: "重新请求审批"},
    "exec.state.expired": {EN: "approval expired", ZH: "审批已过期"},
    "exec.gate.not_passed": {
        EN: "health gate not passed: {failing}",
        ZH: "健康门禁未通过：{failing}",
    },
    "exec.diagnosed": {EN: "diagnosed", ZH: "已诊断"},
    "exec.awaiting": {EN: "awaiting approval", ZH: "等待审批"},
    "exec.executing": {EN: "executing", ZH: "执行中"},
    "exec.running": {
        EN: "running `{command}` (approved by {who})",
        ZH: "正在执行 `{command}`（批准人：{who}）",
    },
    "exec.evicted": {EN: "evicted {done}/{total}", ZH: "已驱逐 {done}/{total}"},
    "exec.cordoned": {EN: "cordoned {node}", ZH: "已 cordon {node}"},
    "exec.was_cordoned": {EN: "{node} was already cordoned", ZH: "{node} 已经是 cordon 状态"},
    "exec.uncordoned": {EN: "uncordoned {node}", ZH: "已 uncordon {node}"},
    "exec.was_not_cordoned": {EN: "{node} was not cordoned", ZH: "{node} 本来就没有 cordon"},
    "exec.drained": {EN: "drained {node}: {detail}", ZH: "已 drain {node}：{detail}"},
    "exec.drain_detail": {
        EN: "{how} {removed} pods{already} in {seconds:.1f} s",
        ZH: "{seconds:.1f} 秒内{how} {removed} 个 Pod{already}",
    },
    "exec.evicted_how": {EN: "evicted", ZH: "驱逐了"},
    "exec.deleted_how": {EN: "deleted", ZH: "删除了"},
    "exec.already_leaving": {EN: ", {n} already leaving", ZH: "，另有 {n} 个已在退出"},
    "exec.drain_refused": {EN: "drain refused: {reasons}", ZH: "drain 被拒绝：{reasons}"},
    "exec.drain_refusal": {EN: "{pod}: {why} (needs {flag})", ZH: "{pod}：{why}（需要 {flag}）"},
    "exec.drain_incomplete": {
        EN: "drain incomplete: {removed} of {wanted} pods moved, {stuck} stuck: {stalls}",
        ZH: "drain 未完成：已迁移 {removed}/{wanted} 个 Pod，{stuck} 个卡住：{stalls}",
    },
    "budget.already_out": {EN: "{node} is already out of service", ZH: "{node} 已经退出服务"},
    "budget.within": {EN: "within budget ({n}/{budget})", ZH: "在预算内（{n}/{budget}）"},
    "exec.whole_drain": {
        EN: "{total} pods moved off in {seconds:.1f} s, by every owner of the drain "
        "(the last: {last})",
        ZH: "{seconds:.1f} 秒内共迁走 {total} 个 Pod，由 drain 的每个执行者完成"
        "（最后一段：{last}）",
    },
    # -- serve ------------------------------------------------------------------------------
    "serve.quarantined": {
        EN: "webhook delivery {id} could not be split into alerts and was set aside (kept in "
        "the store, not diagnosed; the deliveries after it go on): {why}",
        ZH: "webhook 投递 {id} 无法拆分成告警，已搁置（保存在存储中，未诊断；之后的投递照常处理）："
        "{why}",
    },
    # -- the command line's own words ----------------------------------------------------
    "cli.settings.file": {EN: "settings {path}", ZH: "设置文件 {path}"},
    "cli.settings.defaults": {
        EN: "the embedded default settings (no settings file)",
        ZH: "内置默认设置（没有设置文件）",
    },
    "cli.approve.recorded": {
        EN: "recorded: {decision}. The leading `gpubot serve` on this store runs it when it "
        "next looks (within seconds), if its own settings agree",
        ZH: "已记录：{decision}。使用此存储的 leader `gpubot serve` 下次查看时（几秒内）执行它，"
        "前提是它自己的设置也同意",
    },
    "cli.approve.need_another": {
        EN: "recorded: {decision}; nothing runs until then",
        ZH: "已记录：{decision}；在此之前不会执行任何操作",
    },
    "cli.approve.refused": {
        EN: "refused: {why} (policy from {settings}; `gpubot init` writes approvers)",
        ZH: "被拒绝：{why}（策略来自{settings}；`gpubot init` 可写入审批人）",
    },
    "cli.approve.not_run": {
        EN: "not run after {seconds} s: is `gpubot serve` running on this store, and do its "
        "settings name {user} as an approver? `gpubot timeline` shows how it goes on",
        ZH: "{seconds} 秒后仍未执行：`gpubot serve` 是否在使用此存储运行？它的设置是否把 {user} "
        "列为审批人？`gpubot timeline` 可查看后续进展",
    },
    "cli.init.token": {
        EN: "wrote {path} (the Alertmanager webhook's token)",
        ZH: "已写入 {path}（Alertmanager webhook 的 token）",
    },
    "cli.init.wrote": {
        EN: "wrote {path}: approvers {approvers}; store {store}; messages to the console",
        ZH: "已写入 {path}：审批人 {approvers}；存储 {store}；消息输出到控制台",
    },
    "cli.init.read_with": {
        EN: "commands read it with --config {path} or GPUBOT_CONFIG={path}",
        ZH: "各命令通过 --config {path} 或 GPUBOT_CONFIG={path} 读取它",
    },
    "cli.init.next": {
        EN: "next: gpubot serve --kubeconfig ~/.kube/config",
        ZH: "下一步：gpubot serve --kubeconfig ~/.kube/config",
    },
}
"""Key -> language -> a `str.format` template; the same placeholders in both languages."""


STAGES: dict[Stage, dict[Lang, str]] = {
    Stage.JOIN: {EN: "join", ZH: "加入"},
    Stage.DRAIN: {EN: "drain", ZH: "排空"},
    Stage.REBOOT: {EN: "reboot", ZH: "重启"},
    Stage.UPGRADE: {EN: "upgrade", ZH: "升级"},
    Stage.MIG: {EN: "MIG change", ZH: "MIG 变更"},
    Stage.REJOIN: {EN: "rejoin", ZH: "重新加入"},
    Stage.STEADY: {EN: "steady", ZH: "稳定运行"},
}
"""The runbook's lifecycle stages as a person reads them (the value is the code)."""

STATES: dict[IncidentState, dict[Lang, str]] = {
    IncidentState.OPEN: {EN: "open", ZH: "待处理"},
    IncidentState.DIAGNOSED: {EN: "diagnosed", ZH: "已诊断"},
    IncidentState.AWAITING_APPROVAL: {EN: "awaiting approval", ZH: "等待审批"},
    IncidentState.APPROVED: {EN: "approved", ZH: "已批准"},
    IncidentState.DENIED: {EN: "denied", ZH: "已拒绝"},
    IncidentState.EXPIRED: {EN: "expired", ZH: "已过期"},
    IncidentState.EXECUTING: {EN: "executing", ZH: "执行中"},
    IncidentState.SUCCEEDED: {EN: "succeeded", ZH: "已成功"},
    IncidentState.FAILED: {EN: "failed", ZH: "失败"},
    IncidentState.RESOLVED: {EN: "resolved", ZH: "已解决"},
}

KINDS: dict[str, dict[Lang, str]] = {
    "signal": {EN: "signal", ZH: "信号"},
    "diagnosis": {EN: "diagnosis", ZH: "诊断"},
    "proposal": {EN: "proposal", ZH: "建议"},
    "approval": {EN: "approval", ZH: "批准"},
    "denial": {EN: "denial", ZH: "拒绝"},
    "state": {EN: "state", ZH: "状态"},
    "gate": {EN: "gate", ZH: "健康门禁"},
    "action-start": {EN: "action-start", ZH: "开始执行"},
    "action-progress": {EN: "action-progress", ZH: "执行进度"},
    "action-result": {EN: "action-result", ZH: "执行结果"},
    "note": {EN: "note", ZH: "备注"},
    "resolve": {EN: "resolve", ZH: "解决"},
}
"""Timeline entry kinds as a person reads them; a kind not here is shown as its code."""


def say(lang: Lang, key: str, **values: object) -> str:
    """The sentence `key` in `lang`, filled in."""
    return TEXTS[key][lang].format(**values)


def said_in_english(key: str, text: str) -> dict[str, str] | None:
    """The values that fill `key`'s English sentence to make `text`, or None if it is not that
    sentence: a sentence the store keeps in English (no migration for a code beside it, and
    rows written before), read back to be said again in the reader's language."""
    pattern = "".join(
        re.escape(literal) + (f"(?P<{name}>.*?)" if name is not None else "")
        for literal, name, _, _ in Formatter().parse(TEXTS[key][EN])
    )
    found = re.fullmatch(pattern, text, re.DOTALL)
    return found.groupdict() if found is not None else None


def stage_name(stage: Stage, lang: Lang) -> str:
    return STAGES[stage][lang]


def state_name(state: str, lang: Lang) -> str:
    """An `IncidentState` value as a person reads it; an unknown value as itself."""
    try:
        return STATES[IncidentState(state)][lang]
    except ValueError:
        return state


def kind_name(kind: str, lang: Lang) -> str:
    return KINDS.get(kind, {}).get(lang, kind)
