"""The catalogue's part for what gpubot says of a file it was handed and will not read whole:
one over the size limit of its kind, YAML whose aliases would expand it past what Kubernetes'
own YAML reader accepts, JSON nested too deep to read.

Why a part of its own: these are said by the readers of files (`bot.input_files`,
`bot.yamlfiles`, the snapshot and must-gather readers), below every room that speaks to the
chat, and a command prints them as its one line of bad input. What it must never do: hold a
sentence a room above the readers says, or import anything but the shared nouns: `bot.texts`
assembles it.
"""

from __future__ import annotations

from bot.model import Lang

EN, ZH = Lang.EN, Lang.ZH

TEXTS: dict[str, dict[Lang, str]] = {
    # -- a file over the size limit of its kind (`bot.input_files.Limit`) ----------------
    "input.too_big": {
        EN: "{mib} MiB, over the {limit} MiB limit for {kind}",
        ZH: "{mib} MiB，超过{kind}的 {limit} MiB 上限",
    },
    "input.too_big.stream": {
        EN: "more than {limit} MiB, the limit for {kind}",
        ZH: "超过{kind}的 {limit} MiB 上限",
    },
    "input.raise": {
        EN: "; to read it, raise {setting} in the settings file, or run with {env}={needed}",
        ZH: "；如需读取，请在设置文件中调高 {setting}，或以 {env}={needed} 运行",
    },
    "input.hint.yaml_snapshot": {
        EN: "; kubectl's -o json of the same objects is read memory-mapped, in a fraction of "
        "the time and memory",
        ZH: "；同样对象的 kubectl -o json 输出以内存映射方式读取，耗时和内存只是其零头",
    },
    "input.kind.snapshot": {EN: "a JSON snapshot", ZH: "JSON 快照"},
    "input.kind.yaml_snapshot": {EN: "a YAML snapshot", ZH: "YAML 快照"},
    "input.kind.alerts": {EN: "an alerts file", ZH: "告警文件"},
    "input.kind.must_gather_file": {
        EN: "a file of a must-gather",
        ZH: "must-gather 中的单个文件",
    },
    "input.kind.kernel_log": {
        EN: "a kernel log or bug report, unpacked",
        ZH: "解压后的内核日志或 bug report",
    },
    "input.kind.hand_written": {
        EN: "a file written by hand (rules, rule tests, drills, settings, the alert mapping)",
        ZH: "手写文件（规则、规则测试、演练、设置、告警映射）",
    },
    # -- YAML and JSON that would take the machine (`bot.yamlfiles`, `bot.facts.snapshots`)
    "input.yaml.aliases": {
        EN: "by here its YAML aliases have made {nodes} nodes of it, {share}% of them copies: "
        "more than the {allowed}% Kubernetes' YAML reader accepts at this size, so it is refused",
        ZH: "到此处，其 YAML 别名已展开出 {nodes} 个节点，其中 {share}% 是复制：超过了 Kubernetes "
        "的 YAML 解析器在这个规模下接受的 {allowed}%，因此拒绝读取",
    },
    "input.yaml.endless": {
        EN: "a YAML alias stands for a node that holds the alias itself, a document without "
        "end: refused",
        ZH: "YAML 别名指向包含该别名自身的节点，文档没有尽头：已拒绝",
    },
    "input.nested_too_deep": {
        EN: "nested too deep to read (a Kubernetes object nests a dozen levels or so)",
        ZH: "嵌套太深，无法读取（Kubernetes 对象一般只嵌套十几层）",
    },
    "input.yaml.too_deep": {
        EN: "nested more than {depth} levels deep (a Kubernetes object nests a dozen or so): "
        "refused",
        ZH: "嵌套超过 {depth} 层（Kubernetes 对象一般只嵌套十几层）：已拒绝",
    },
}
