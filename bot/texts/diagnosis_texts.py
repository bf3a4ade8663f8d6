"""The catalogue's part for diagnoses: the names of the runbook's lifecycle stages, the answers
to the four questions, and the lines a diagnosis adds to its rule's evidence (other alerts
firing, a GPU node's Prometheus evidence).

Why a part of its own: a diagnosis is what the on-call reads first, and the words it is made
of are said by the diagnosis itself, not by the chat that shows it. What it must never do:
hold a rule's own text (titles, causes, runbook steps: the rule files carry both languages
and `gpubot rules lint` checks them), or import anything but the shared nouns: `bot.texts`
assembles it.
"""

from __future__ import annotations

from bot.model import Lang

EN, ZH = Lang.EN, Lang.ZH

TEXTS: dict[str, dict[Lang, str]] = {
    # -- the runbook's lifecycle stages (the code after the dot is the `Stage` value)
    "stage.join": {EN: "join", ZH: "加入"},
    "stage.drain": {EN: "drain", ZH: "排空"},
    "stage.reboot": {EN: "reboot", ZH: "重启"},
    "stage.upgrade": {EN: "upgrade", ZH: "升级"},
    "stage.mig": {EN: "MIG change", ZH: "MIG 变更"},
    "stage.rejoin": {EN: "rejoin", ZH: "重新加入"},
    "stage.steady": {EN: "steady", ZH: "稳定运行"},
    # -- the four questions a diagnosis answers from the facts (`bot.diagnose`), and the
    # lines it adds to a rule's evidence
    "diagnosis.unknown_node": {
        EN: "no: no node of this name in the cluster, only alerts name it",
        ZH: "否：集群中没有这个名字的节点，只有告警提到它",
    },
    "diagnosis.not_a_node_name": {
        EN: "; no Kubernetes node can have this name (only lowercase letters, digits, '-' and "
        "'.'): look for invisible, bidi or look-alike characters in the label",
        ZH: "；Kubernetes 节点不可能叫这个名字（只能有小写字母、数字、'-' 和 '.'）：请检查标签中"
        "的不可见字符、双向控制字符或形近字符",
    },
    "diagnosis.absent_node": {
        EN: "no node {node} in the cluster (only alerts name it): check the alerts' node label; "
        "no command is offered for it",
        ZH: "集群中没有节点 {node}（只有告警提到它）：请核对告警的 node 标签；不为它提供命令",
    },
    "diagnosis.registered_yes": {
        EN: "yes: Ready, kubelet {kubelet}, runtime {runtime}",
        ZH: "是：Ready，kubelet {kubelet}，运行时 {runtime}",
    },
    "diagnosis.registered_other": {EN: "; other conditions: {conds}", ZH: "；其他条件：{conds}"},
    "diagnosis.registered_no": {
        EN: "no: Ready={ready}{msg}; fix kubelet, runtime, CNI, certificates and clock first, do "
        "not touch the GPU stack yet",
        ZH: "否：Ready={ready}{msg}；先修 kubelet、运行时、CNI、证书和时间同步，不要急着动 GPU",
    },
    "diagnosis.not_gpu": {EN: "not a GPU node", ZH: "不是 GPU 节点"},
    "diagnosis.gpu_yes": {
        EN: "yes: {alloc}/{expected} {res} allocatable",
        ZH: "是：{res} 可分配 {alloc}/{expected}",
    },
    "diagnosis.gpu_no": {
        EN: "no: {alloc} of {expected} {res} allocatable",
        ZH: "否：{res} 可分配 {alloc}，应为 {expected}",
    },
    "diagnosis.gpu_mig": {EN: "MIG resources allocatable: {mig}", ZH: "MIG 可分配资源：{mig}"},
    "diagnosis.gpu_failing": {EN: "; failing: {comps}", ZH: "；异常组件：{comps}"},
    "diagnosis.gpu_absent": {EN: "; no pod of: {comps}", ZH: "；缺少 Pod：{comps}"},
    "diagnosis.wl_cordoned": {
        EN: "node cordoned {mins} min ago, {remaining} pod(s) still to evict",
        ZH: "节点已 cordon {mins} 分钟，仍有 {remaining} 个 Pod 待驱逐",
    },
    "diagnosis.wl_cordoned_unknown": {
        EN: "node cordoned, {remaining} pod(s) still to evict",
        ZH: "节点已 cordon，仍有 {remaining} 个 Pod 待驱逐",
    },
    "diagnosis.wl_blockers": {EN: "; blocked by: {blockers}", ZH: "；阻塞原因：{blockers}"},
    "diagnosis.wl_running": {
        EN: "{gpu_pods} GPU pod(s) running here",
        ZH: "本节点运行 {gpu_pods} 个 GPU Pod",
    },
    "diagnosis.wl_pending": {
        EN: "; cluster-wide {n} GPU pod(s) Pending: {reasons}",
        ZH: "；集群内 {n} 个 GPU Pod Pending：{reasons}",
    },
    "diagnosis.wl_none_pending": {EN: "; no GPU pod is Pending", ZH: "；没有 Pending 的 GPU Pod"},
    "diagnosis.scope_pool": {
        EN: "{n} of {size} nodes in pool {pool} show this",
        ZH: "节点池 {pool} 的 {size} 个节点中有 {n} 个出现此问题",
    },
    "diagnosis.scope_pool_findings": {
        EN: "{n} of {size} nodes in pool {pool} have a finding",
        ZH: "节点池 {pool} 的 {size} 个节点中有 {n} 个存在问题",
    },
    "diagnosis.scope_node": {EN: "this node only (pool unknown)", ZH: "仅此节点（节点池未知）"},
    "diagnosis.scope_drivers": {
        EN: "; pool driver versions: {drivers}",
        ZH: "；节点池驱动版本：{drivers}",
    },
    "diagnosis.scope_absent": {
        EN: "not counted (not in the cluster); {n} node(s) in the cluster show this",
        ZH: "不计入（不在集群中）；集群内 {n} 个节点出现此问题",
    },
    "diagnosis.pool_registered": {
        EN: "{ready} of {size} nodes Ready",
        ZH: "{size} 个节点中 {ready} 个 Ready",
    },
    "diagnosis.pool_gpu": {
        EN: "{alloc} of {expected} {res} allocatable across the pool",
        ZH: "节点池 {res} 可分配 {alloc}，应为 {expected}",
    },
    "diagnosis.cluster_registered": {
        EN: "{nodes} node(s) in the snapshot",
        ZH: "快照中共 {nodes} 个节点",
    },
    "diagnosis.cluster_gpu": {EN: "resources offered: {res}", ZH: "集群提供的资源：{res}"},
    "diagnosis.cluster_scope": {
        EN: "{n} pod(s) in {ns} namespace(s)",
        ZH: "{ns} 个命名空间中的 {n} 个 Pod",
    },
    "diagnosis.halted": {
        EN: "pool-wide failure in {pool}: node-by-node remediation withdrawn",
        ZH: "节点池 {pool} 整体故障：撤回逐节点处置建议",
    },
    "diagnosis.expected": {EN: "expected: {note}", ZH: "预期内：{note}"},
    "diagnosis.also_firing": {EN: "also firing: {alert}{text}", ZH: "同时告警：{alert}{text}"},
    "diagnosis.also_read_as": {EN: "; read as {symptom}", ZH: "；识别为 {symptom}"},
    "diagnosis.also_more": {
        EN: "also firing: {n} more alert(s) no rule reads",
        ZH: "同时告警：另有 {n} 条规则不读的告警",
    },
    # -- a GPU node's Prometheus evidence as lines of its diagnosis (`bot.facts.metric_lines`)
    "metrics.span.seconds": {EN: "{seconds} s", ZH: "{seconds} 秒"},
    "metrics.span.minutes": {EN: "{minutes} min", ZH: "{minutes} 分钟"},
    "metrics.span.hours": {EN: "{hours} h", ZH: "{hours} 小时"},
    "metrics.unavailable": {EN: "evidence unavailable: {reason}", ZH: "证据不可用：{reason}"},
    "metrics.exporter_down": {
        EN: "dcgm-exporter on {node} is down (up = 0)",
        ZH: "{node} 上的 dcgm-exporter 已停止（up = 0）",
    },
    "metrics.no_series": {
        EN: "no dcgm-exporter metrics for {node} ({label}) in the last {span}",
        ZH: "最近 {span}内没有 {node} 的 dcgm-exporter 指标（标签 {label}）",
    },
    "metrics.wrong_label": {
        EN: 'dcgm-exporter on {node} is up, but no series has {label}="{node}": is the node '
        "label right?",
        ZH: '{node} 上的 dcgm-exporter 在运行，但没有带 {label}="{node}" 的序列：'
        "节点标签配置对吗？",
    },
    "metrics.summary": {
        EN: "{node}: {reporting} GPU(s) reporting, hottest {temp}, {power} in total",
        ZH: "{node}：{reporting} 块 GPU 在上报，最高温度 {temp}，总功耗 {power}",
    },
    "metrics.stopped": {
        EN: "GPU {gpu}: stopped reporting at {at} (a GPU that fell off the bus does)",
        ZH: "GPU {gpu}：{at} 起不再上报指标（GPU 掉卡时就是这样）",
    },
    "metrics.xid_at": {EN: "GPU {gpu}: Xid {code} at {at}", ZH: "GPU {gpu}：{at} 出现 Xid {code}"},
    "metrics.xid_before": {
        EN: "GPU {gpu}: Xid {code} (already set at {at})",
        ZH: "GPU {gpu}：Xid {code}（{at} 时已存在）",
    },
    "metrics.xid": {EN: "GPU {gpu}: Xid {code}", ZH: "GPU {gpu}：Xid {code}"},
    "metrics.xid_count": {EN: ", {count}× counted", ZH: "，计数 {count} 次"},
    "metrics.ecc": {
        EN: "GPU {gpu}: ECC {kind} +{increase} in {span} (total {total})",
        ZH: "GPU {gpu}：ECC {kind} 在 {span}内 +{increase}（累计 {total}）",
    },
    "metrics.remap_failure": {EN: "GPU {gpu}: row remapping failed", ZH: "GPU {gpu}：行重映射失败"},
    "metrics.remapped": {
        EN: "GPU {gpu}: {rows} row(s) remapped for uncorrectable errors",
        ZH: "GPU {gpu}：因不可纠正错误已重映射 {rows} 行",
    },
    "metrics.nvlink": {
        EN: "GPU {gpu}: NVLink errors +{total} in {span} ({parts})",
        ZH: "GPU {gpu}：NVLink 错误在 {span}内 +{total}（{parts}）",
    },
    "metrics.hot": {EN: "GPU {gpu}: temperature up to {temp}", ZH: "GPU {gpu}：温度最高 {temp}"},
    "metrics.clean": {
        EN: "no Xid, ECC, row-remap or NVLink errors in the last {span}",
        ZH: "最近 {span}内没有 Xid、ECC、行重映射或 NVLink 错误",
    },
    "metrics.not_exported": {
        EN: "not exported by dcgm-exporter: {groups} (enable them in its counters CSV)",
        ZH: "dcgm-exporter 未导出：{groups}（需在其 counters CSV 中开启）",
    },
}
