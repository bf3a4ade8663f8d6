"""Diagnoses for a terminal (rich) and for Markdown: what `gpubot diagnose` and `demo` show."""

from __future__ import annotations

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from bot.model import Diagnosis, Lang, Severity

_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_LABELS = {
    Lang.EN: {
        "registered": "Registered?",
        "gpu_visible": "GPUs visible?",
        "workloads": "Why didn't workloads go?",
        "scope": "How wide?",
        "stage": "stage",
        "evidence": "Evidence",
        "blockers": "Blockers",
        "causes": "Likely causes",
        "check_first": "Check first",
        "runbook": "Runbook",
        "rollback": "Rollback",
        "proposals": "Proposed",
        "approval": "needs approval",
        "none": "no action: observe",
        "healthy": "No diagnosis: nothing in the snapshot matches a rule.",
    },
    Lang.ZH: {
        "registered": "节点注册了吗？",
        "gpu_visible": "GPU 被调度器看见了吗？",
        "workloads": "工作负载为什么没走？",
        "scope": "变更范围多大？",
        "stage": "阶段",
        "evidence": "证据",
        "blockers": "阻塞项",
        "causes": "可能原因",
        "check_first": "先查",
        "runbook": "处置步骤",
        "rollback": "回滚",
        "proposals": "建议操作",
        "approval": "需审批",
        "none": "无操作：继续观察",
        "healthy": "无诊断：快照中没有匹配任何规则的问题。",
    },
}


def _subject(d: Diagnosis) -> str:
    if d.node:
        return f"{d.node}" + (f" ({d.pool})" if d.pool else "")
    return f"pool {d.pool}" if d.pool else "cluster"


def _proposal_lines(d: Diagnosis, labels: dict[str, str]) -> list[str]:
    lines = []
    for p in d.proposals:
        if p.action.value == "none":
            lines.append(labels["none"])
        else:
            force = " --force" if p.force else ""
            lines.append(f"{p.action.value}{force} {p.node or ''} ({labels['approval']})")
    return lines


def render_panel(d: Diagnosis) -> Panel:
    """Every string from the cluster goes in as `Text`: a `[` in a pod message is not markup."""
    labels = _LABELS[d.lang]
    body = Table.grid(padding=(0, 1))
    body.add_column(style="bold", no_wrap=True)
    # fold, never ellipsis: a runbook step cut short at 3 a.m. is worse than a long panel
    body.add_column(overflow="fold")

    def row(label: str, value: str | Text) -> None:
        body.add_row(Text(label), value if isinstance(value, Text) else Text(value))

    row(labels["stage"], d.stage.value)
    row("", d.summary)
    for key in ("registered", "gpu_visible", "workloads", "scope"):
        row(labels[key], getattr(d.questions, key))
    if d.evidence:
        row(labels["evidence"], "\n".join(f"• {e}" for e in d.evidence))
    if d.blockers:
        row(
            labels["blockers"],
            "\n".join(
                f"• {b.kind}: {b.namespace}/{b.pod} — {b.detail}"
                + (f" [{b.bypass_flag}]" if b.bypass_flag else "")
                for b in d.blockers
            ),
        )
    row(labels["check_first"], d.check_first)
    steps = Text()
    for number, step in enumerate(d.runbook, 1):
        steps.append(f"{number}. {step.text}\n")
        for command in step.commands:
            steps.append(f"   $ {command}\n", style="green")
    row(labels["runbook"], steps)
    row(labels["rollback"], d.rollback)
    row(labels["proposals"], "\n".join(_proposal_lines(d, labels)))
    style = _STYLE[d.severity]
    title = Text.assemble(
        (d.severity.value.upper(), style),
        f" {d.title} — {_subject(d)}  ",
        (d.rule, "dim"),
    )
    return Panel(body, title=title, title_align="left", border_style=style)


def print_diagnoses(diagnoses: list[Diagnosis], console: Console, lang: Lang) -> None:
    if not diagnoses:
        console.print(_LABELS[lang]["healthy"])
        return
    console.print(Group(*(render_panel(d) for d in diagnoses)))


def render_markdown(diagnoses: list[Diagnosis], lang: Lang) -> str:
    labels = _LABELS[lang]
    if not diagnoses:
        return labels["healthy"] + "\n"
    out: list[str] = []
    for d in diagnoses:
        out.append(f"## {d.severity.value.upper()}: {d.title} — {_subject(d)}")
        out.append(f"`{d.rule}` · {labels['stage']}: **{d.stage.value}**\n")
        out.append(d.summary + "\n")
        for key in ("registered", "gpu_visible", "workloads", "scope"):
            out.append(f"- **{labels[key]}** {getattr(d.questions, key)}")
        if d.evidence:
            out.append(f"\n**{labels['evidence']}**\n")
            out.extend(f"- {e}" for e in d.evidence)
        if d.blockers:
            out.append(f"\n**{labels['blockers']}**\n")
            out.extend(f"- {b.kind}: `{b.namespace}/{b.pod}` — {b.detail}" for b in d.blockers)
        out.append(f"\n**{labels['check_first']}**: {d.check_first}\n")
        out.append(f"**{labels['runbook']}**\n")
        for number, step in enumerate(d.runbook, 1):
            out.append(f"{number}. {step.text}")
            if step.commands:
                out.append("   ```")
                out.extend(f"   {c}" for c in step.commands)
                out.append("   ```")
        out.append(f"\n**{labels['rollback']}**: {d.rollback}\n")
        out.append(f"**{labels['proposals']}**: " + "; ".join(_proposal_lines(d, labels)) + "\n")
    return "\n".join(out)
