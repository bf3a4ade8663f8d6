"""The catalogue's part for decisions and actions: the approval policy's judgement, a vote's
outcome, a request's risk, the blast radius, and what the executor tells the timeline and the
thread while it cordons, drains and uncordons.

Why a part of its own: these are the sentences a person reads before and after a node is
touched, and the executor's are the most numerous of the catalogue. What it must never do:
be matched on to decide anything (code decides on outcomes, then says them), or import
anything but the shared nouns: `bot.texts` assembles it.
"""

from __future__ import annotations

from bot.model import Lang

EN, ZH = Lang.EN, Lang.ZH

TEXTS: dict[str, dict[Lang, str]] = {
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
    "approval.nobody": {EN: "nobody is configured", ZH: "未配置任何人"},
    "approval.deny_refused": {
        EN: "you are not allowed to deny {action} on {node} (may deny it: {who})",
        ZH: "你无权拒绝对 {node} 的 {action}（可以拒绝的人：{who}）",
    },
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
    "decide.voted_before": {EN: "{who} already approved this", ZH: "{who} 已经批准过了"},
    "exec.leader_runs_it": {EN: "{message}; the leader runs it", ZH: "{message}；由主副本执行"},
    "exec.already_executed": {EN: "already executed{state}", ZH: "已执行过{state}"},
    "approval.approved": {EN: "{what} approved by {who}", ZH: "{what} 已由 {who} 批准"},
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
    "exec.blocked": {EN: "blocked {pod}: {detail}", ZH: "{pod} 被挡住：{detail}"},
    "exec.still_blocked": {
        EN: "{n} pod(s) still blocked by {cause}, {seconds} s",
        ZH: "{n} 个 Pod 仍被 {cause} 挡住，{seconds} 秒",
    },
    "exec.handed_over": {
        EN: "{who} is shutting down: `{command}` handed over to the next leader",
        ZH: "{who} 正在关闭：`{command}` 已交给下一个 leader 接管",
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
}
