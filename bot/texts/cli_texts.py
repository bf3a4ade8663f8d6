"""The catalogue's part for what the command line says on its own: the demo's scenes, what
`gpubot serve` tells the channel of a webhook delivery it set aside, and the words of
`gpubot init` and `gpubot approve`.

Why a part of its own: these are said by the composition roots and the commands, never by a
room of the house below them; kept apart, the rooms' parts stay about the rooms. What it must
never do: hold a sentence a room below the roots says (that belongs in that room's part), or
import anything but the shared nouns: `bot.texts` assembles it.
"""

from __future__ import annotations

from bot.model import Lang

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
