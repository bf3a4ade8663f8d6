"""Diagnoses for a terminal (rich) and for Markdown: what `gpubot diagnose` and `demo` show."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, Group
from rich.panel import Panel
from rich.prompt import Prompt
from rich.table import Table
from rich.text import Text

from bot.model import ActionRequest, Diagnosis, Incident, Lang, Severity, TimelineEntry

EVIDENCE_SHOWN = 10
"""Evidence lines a chat message shows (Slack and console); the timeline keeps them all."""

_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
LABELS = {
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
        "more": "… {n} more in the timeline",
        "many": "{n} diagnoses, shown as Markdown (up to {max} are drawn as panels)",
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
        "more": "… 另有 {n} 条，见时间线",
        "many": "共 {n} 条诊断，以 Markdown 显示（不超过 {max} 条时以面板显示）",
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


def render_panel(d: Diagnosis, evidence_shown: int | None = None) -> Panel:
    """Every string from the cluster goes in as `Text`: a `[` in a pod message is not markup.
    With `evidence_shown`, a chat message: longer evidence ends with how many more lines the
    timeline holds, as in Slack (a thousand alerts must not make a thousand-line message)."""
    labels = LABELS[d.lang]
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
        shown = d.evidence if evidence_shown is None else d.evidence[:evidence_shown]
        lines = [f"• {e}" for e in shown]
        if len(shown) < len(d.evidence):
            lines.append(labels["more"].format(n=len(d.evidence) - len(shown)))
        row(labels["evidence"], "\n".join(lines))
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


PANELS_MAX = 50
"""Diagnoses drawn as panels; more are printed as Markdown. Rich lays a panel out in about
19 ms: the 330 diagnoses of a 5,000-node snapshot took 6 s to draw, longer than finding them."""


def print_diagnoses(diagnoses: list[Diagnosis], console: Console, lang: Lang) -> None:
    if not diagnoses:
        console.print(LABELS[lang]["healthy"])
        return
    if len(diagnoses) > PANELS_MAX:
        many = LABELS[lang]["many"].format(n=len(diagnoses), max=PANELS_MAX)
        console.file.write(f"{many}\n\n{render_markdown(diagnoses, lang)}\n")
        return
    console.print(Group(*(render_panel(d) for d in diagnoses)))


def render_markdown(diagnoses: list[Diagnosis], lang: Lang) -> str:
    labels = LABELS[lang]
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


def render_request(request: ActionRequest) -> Text:
    """One approvable request, the way the Slack button and its confirm dialog say it."""
    options = " --force" if request.force else ""
    options += " (health gate overridden)" if request.override_gate else ""
    text = Text.assemble(
        ("▶ ", "bold"),
        (f"{request.action.value}{options} {request.node}", "bold"),
        f"  request {request.id}, expires {request.expires_at:%H:%M:%S} UTC",
    )
    if request.risk:
        text.append(f"\n  risk: {request.risk}", style="yellow")
    return text


def render_timeline(entries: Sequence[TimelineEntry]) -> Table:
    table = Table(show_header=True, header_style="bold", expand=False)
    table.add_column("when (UTC)", no_wrap=True)
    table.add_column("who", no_wrap=True)
    table.add_column("what", no_wrap=True)
    table.add_column("", overflow="fold")
    for entry in entries:
        table.add_row(
            Text(f"{entry.at:%Y-%m-%d %H:%M:%S}"),
            Text(entry.actor),
            Text(entry.kind),
            Text(entry.text),
        )
    return table


def timeline_markdown(entries: Sequence[TimelineEntry]) -> str:
    lines = ["| when (UTC) | who | what | |", "|---|---|---|---|"]
    for e in entries:
        text = e.text.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {e.at:%Y-%m-%d %H:%M:%S} | {e.actor} | {e.kind} | {text} |")
    return "\n".join(lines) + "\n"


def render_summary(title: str, lines: Sequence[tuple[str, str]]) -> Panel:
    body = Table.grid(padding=(0, 1))
    body.add_column(style="bold", no_wrap=True)
    body.add_column(overflow="fold")
    for label, value in lines:
        body.add_row(Text(label), Text(value))
    return Panel(body, title=Text(title), title_align="left", border_style="green")


class ConsoleApprover:
    """Approve or deny at a prompt; with `approve_as` set, approves as that person without
    asking (scripted runs: `gpubot demo --approve-as alice`)."""

    def __init__(self, console: Console, approve_as: str | None) -> None:
        self.console = console
        self.approve_as = approve_as

    def ask(self, request: ActionRequest) -> tuple[bool, str]:
        """(approved?, who)."""
        self.console.print(render_request(request))
        if self.approve_as:
            self.console.print(Text(f"  approved by {self.approve_as} (--approve-as)", "green"))
            return True, self.approve_as
        answer = Prompt.ask(
            f"  approve {request.action.value} {request.node}?",
            choices=["approve", "deny"],
            default="deny",
            console=self.console,
        )
        return answer == "approve", "you"


class ConsoleChat:
    """The Chat port on a terminal: `gpubot serve --chat console` and the drills."""

    def __init__(self, console: Console, lang: Lang) -> None:
        self.console = console
        self.lang = lang

    def post_diagnosis(
        self, incident: Incident, diagnosis: Diagnosis, requests: Sequence[ActionRequest]
    ) -> str | None:
        self.console.print(Text(f"incident {incident.id}", style="bold"))
        self.console.print(render_panel(diagnosis, EVIDENCE_SHOWN))
        for request in requests:
            self.console.print(render_request(request))
        return f"console:{incident.id}"

    def post_thread(self, incident: Incident, text: str) -> None:
        self.console.print(Text(f"  [incident {incident.id}] {text}"))

    def ask_again(
        self, incident: Incident | None, old: ActionRequest, new: ActionRequest, why: str
    ) -> None:
        prefix = f"  [incident {incident.id}] " if incident else "  "
        self.console.print(Text(f"{prefix}{why}"))
        self.console.print(render_request(new))

    def revise_diagnosis(
        self,
        incident: Incident,
        diagnosis: Diagnosis,
        requests: Sequence[ActionRequest],
        note: str,
    ) -> None:
        self.console.print(Text(f"  [incident {incident.id}] {note}", style="bold"))
        self.console.print(render_panel(diagnosis, EVIDENCE_SHOWN))
        for request in requests:
            self.console.print(render_request(request))

    def withdraw(self, incident: Incident, request: ActionRequest, why: str) -> None:
        self.console.print(
            Text(f"  [incident {incident.id}] request {request.id} withdrawn: {why}")
        )

    def post_notice(self, text: str, monospace: bool = False) -> None:
        # A terminal's font is fixed-width already: `monospace` changes nothing here.
        self.console.print(Text(text, style="yellow"))
