"""The catalogue's part for what gpubot says of a file it was handed and will not read whole:
YAML whose aliases would expand it past what Kubernetes' own YAML reader accepts, or nested
too deep to read.

Why a part of its own: these are said by the readers of files (`bot.yamlfiles`, the
snapshot and must-gather readers), below every room that speaks to the
chat, and a command prints them as its one line of bad input. What it must never do: hold a
sentence a room above the readers says, or import anything but the shared nouns: `bot.texts`
assembles it.
"""

from __future__ import annotations

from bot.model import Lang

EN, ZH = Lang.EN, Lang.ZH

TEXTS: dict[str, dict[Lang, str]] = {
    # -- YAML that would take the machine (`bot.yamlfiles`) --------------------------------
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
