"""Diagnoses for a terminal (rich) and for Markdown: what `gpubot diagnose` and `demo` show.

Why it exists: the on-call reads a diagnosis in a terminal as often as in Slack, and must read
the same there. What it must never do: word a label or a line itself — the labels are the
catalogue's (`message.*` in bot/texts/chat_texts.py), shared with the Slack message
(`bot.chat.blocks`), so both say the same in both languages.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.cells import cell_len, chop_cells
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.panel import Panel
from rich.prompt import Prompt
from rich.table import Table
from rich.text import Text

from bot.model import ActionRequest, Diagnosis, Incident, Lang, Severity, TimelineEntry
from bot.outside_text import shown_name, visible
from bot.texts import kind_name, say, stage_name

EVIDENCE_SHOWN = 10
"""Evidence lines a chat message shows (Slack and console); the timeline keeps them all."""

_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}

QUESTIONS = ("registered", "gpu_visible", "workloads", "scope")
"""The four questions every diagnosis answers, in the order shown; each is a field of
`Questions` and its label is the catalogue's `message.<question>`."""


def _subject(d: Diagnosis) -> str:
    # A node's name as `shown_name` writes it: one only alerts give may look like a real one.
    if d.node:
        return shown_name(d.node) + (f" ({d.pool})" if d.pool else "")
    return f"pool {d.pool}" if d.pool else "cluster"


def proposal_lines(d: Diagnosis, lang: Lang) -> list[str]:
    """What the diagnosis proposes, one line a proposal, as the console and Slack show it."""
    lines = []
    for p in d.proposals:
        if p.action.value == "none":
            lines.append(say(lang, "message.none"))
        else:
            force = " --force" if p.force else ""
            needs = say(lang, "message.approval")
            lines.append(f"{p.action.value}{force} {p.node or ''} ({needs})")
    return lines


class Prose:
    """Text that wraps as Chinese and English are typeset: between words, between CJK
    characters, but never before closing punctuation (a lone `。` on its own line) nor after an
    opening one. Rich alone breaks only at spaces, so a CJK sentence moved whole to the next
    line and was then cut at the column edge wherever it fell."""

    def __init__(self, text: str, style: str = "") -> None:
        # Outside text in it (labels, summaries) keeps no invisible or bidi character as it
        # is: a right-to-left override would turn the rest of the line around.
        self.text = visible(text)
        self.style = style

    def _units(self, line: str) -> list[str]:
        units: list[str] = []
        for match in _UNIT.finditer(line):
            unit = match.group(0)
            if units and (unit[0] in _CLOSING or units[-1][-1] in _OPENING):
                units[-1] += unit
            else:
                units.append(unit)
        return units

    def lines(self, width: int) -> list[str]:
        out: list[str] = []
        for paragraph in self.text.split("\n"):
            line = ""
            for unit in self._units(paragraph):
                if line and cell_len((line + unit).rstrip()) > width:
                    out.append(line.rstrip())
                    line = unit.lstrip()
                else:
                    line += unit
                while cell_len(line.rstrip()) > width:  # one unit wider than the column
                    head, *_ = chop_cells(line, width)
                    out.append(head)
                    line = line[len(head) :]
            out.append(line.rstrip())
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text("\n".join(self.lines(options.max_width)), style=self.style, overflow="fold")

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        paragraphs = self.text.split("\n")
        widest = max((cell_len(u.rstrip()) for p in paragraphs for u in self._units(p)), default=0)
        longest = max((cell_len(p) for p in paragraphs), default=0)
        return Measurement(min(widest, options.max_width), min(longest, options.max_width))


_CLOSING = set("，。、；：！？）」』》】〉,.;:!?)]}%")
_OPENING = set("（「『《【〈([{")
_CJK = "\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f"
# A unit: one CJK character, or a run of other non-space characters, with the spaces after it.
_UNIT = re.compile(rf"[{_CJK}]\s*|[^\s{_CJK}]+\s*|\s+")


def _title(d: Diagnosis) -> Text:
    """Severity and subject only: a border title is cut, not wrapped, and a rule's title is
    too long for 80 columns; the rule's title and id open the body instead."""
    return Text.assemble((d.severity.value.upper(), _STYLE[d.severity]), f" {_subject(d)} ")


def render_panel(d: Diagnosis, evidence_shown: int | None = None) -> Panel:
    """Every string from the cluster goes in as `Text`: a `[` in a pod message is not markup.
    With `evidence_shown`, a chat message: longer evidence ends with how many more lines the
    timeline holds, as in Slack (a thousand alerts must not make a thousand-line message).
    The runbook is not in the panel: `print_diagnosis` prints it below, where a command is
    never wrapped."""
    lang = d.lang
    body = Table.grid(padding=(0, 1))
    body.add_column(style="bold", no_wrap=True)
    # fold, never ellipsis: a runbook step cut short at 3 a.m. is worse than a long panel
    body.add_column(overflow="fold")

    def row(label: str, value: str | Prose) -> None:
        body.add_row(Text(label), value if isinstance(value, Prose) else Prose(value))

    row("", Prose(d.title, "bold"))
    body.add_row(Text(""), Text(d.rule, style="dim", overflow="fold"))
    row(say(lang, "message.stage"), stage_name(d.stage, lang))
    row("", d.summary)
    for key in QUESTIONS:
        row(say(lang, f"message.{key}"), getattr(d.questions, key))
    if d.evidence:
        shown = d.evidence if evidence_shown is None else d.evidence[:evidence_shown]
        lines = [f"• {e}" for e in shown]
        if len(shown) < len(d.evidence):
            lines.append(say(lang, "message.more", n=len(d.evidence) - len(shown)))
        row(say(lang, "message.evidence"), "\n".join(lines))
    if d.blockers:
        row(
            say(lang, "message.blockers"),
            "\n".join(
                f"• {b.kind}: {b.namespace}/{b.pod} — {b.detail}"
                + (f" [{b.bypass_flag}]" if b.bypass_flag else "")
                for b in d.blockers
            ),
        )
    row(say(lang, "message.check_first"), d.check_first)
    row(say(lang, "message.rollback"), d.rollback)
    row(say(lang, "message.proposals"), "\n".join(proposal_lines(d, lang)))
    style = _STYLE[d.severity]
    return Panel(body, title=_title(d), title_align="left", border_style=style)


def print_runbook(d: Diagnosis, console: Console) -> None:
    """The runbook's steps below the panel, each command on its own line, never soft-wrapped
    and never cropped: copied from any terminal width, it is the whole command. (A terminal
    may still fold a long line on screen; copying it gives back the one line.)"""
    console.print(Text(say(d.lang, "message.runbook"), style="bold"))
    for number, step in enumerate(d.runbook, 1):
        head = f" {number}. "
        for index, line in enumerate(Prose(step.text).lines(console.width - len(head))):
            console.print(Text((head if index == 0 else " " * len(head)) + line))
        for command in step.commands:
            console.print(Text(visible(f"   $ {command}"), style="green"), soft_wrap=True)


def print_diagnosis(d: Diagnosis, console: Console, evidence_shown: int | None = None) -> None:
    console.print(render_panel(d, evidence_shown))
    print_runbook(d, console)


PANELS_MAX = 50
"""Diagnoses drawn as panels; more are printed as Markdown. Rich lays a panel out in about
19 ms: the 330 diagnoses of a 5,000-node snapshot took 6 s to draw, longer than finding them."""


def print_diagnoses(diagnoses: list[Diagnosis], console: Console, lang: Lang) -> None:
    if not diagnoses:
        console.print(say(lang, "message.healthy"))
        return
    if len(diagnoses) > PANELS_MAX:
        many = say(lang, "message.many", n=len(diagnoses), max=PANELS_MAX)
        console.file.write(f"{many}\n\n{render_markdown(diagnoses, lang)}\n")
        return
    for d in diagnoses:
        print_diagnosis(d, console)


def render_markdown(diagnoses: list[Diagnosis], lang: Lang) -> str:

    def label(key: str) -> str:
        return say(lang, f"message.{key}")

    if not diagnoses:
        return label("healthy") + "\n"
    out: list[str] = []
    for d in diagnoses:
        out.append(f"## {d.severity.value.upper()}: {d.title} — {_subject(d)}")
        out.append(f"`{d.rule}` · {label('stage')}: **{stage_name(d.stage, lang)}**\n")
        out.append(d.summary + "\n")
        for key in QUESTIONS:
            out.append(f"- **{label(key)}** {getattr(d.questions, key)}")
        if d.evidence:
            out.append(f"\n**{label('evidence')}**\n")
            out.extend(f"- {e}" for e in d.evidence)
        if d.blockers:
            out.append(f"\n**{label('blockers')}**\n")
            out.extend(f"- {b.kind}: `{b.namespace}/{b.pod}` — {b.detail}" for b in d.blockers)
        out.append(f"\n**{label('check_first')}**: {d.check_first}\n")
        out.append(f"**{label('runbook')}**\n")
        for number, step in enumerate(d.runbook, 1):
            out.append(f"{number}. {step.text}")
            if step.commands:
                out.append("   ```")
                out.extend(f"   {c}" for c in step.commands)
                out.append("   ```")
        out.append(f"\n**{label('rollback')}**: {d.rollback}\n")
        out.append(f"**{label('proposals')}**: " + "; ".join(proposal_lines(d, lang)) + "\n")
    return visible("\n".join(out))


def render_request(request: ActionRequest, lang: Lang = Lang.EN) -> Text:
    """One approvable request, the way the Slack button and its confirm dialog say it."""
    options = " --force" if request.force else ""
    options += say(lang, "console.gate_overridden") if request.override_gate else ""
    expires = f"{request.expires_at:%H:%M:%S}"
    text = Text.assemble(
        ("▶ ", "bold"),
        (f"{request.action.value}{options} {request.node}", "bold"),
        "  " + say(lang, "console.request", id=request.id, time=expires),
    )
    if request.risk:
        text.append("\n  " + say(lang, "console.risk", risk=request.risk), style="yellow")
    return text


def render_timeline(entries: Sequence[TimelineEntry], lang: Lang = Lang.EN) -> Table:
    table = Table(show_header=True, header_style="bold", expand=False)
    table.add_column(say(lang, "timeline.when"), no_wrap=True)
    table.add_column(say(lang, "timeline.who"), no_wrap=True)
    table.add_column(say(lang, "timeline.what"), no_wrap=True)
    table.add_column(say(lang, "timeline.text"), overflow="fold")
    for entry in entries:
        table.add_row(
            Text(f"{entry.at:%Y-%m-%d %H:%M:%S}"),
            Text(visible(entry.actor)),
            Text(kind_name(entry.kind, lang)),
            Prose(entry.text),
        )
    return table


def timeline_markdown(entries: Sequence[TimelineEntry], lang: Lang = Lang.EN) -> str:
    head = [
        say(lang, k) for k in ("timeline.when", "timeline.who", "timeline.what", "timeline.text")
    ]
    lines = ["| " + " | ".join(head) + " |", "|---|---|---|---|"]
    for e in entries:
        text = e.text.replace("|", "\\|").replace("\n", " ")
        kind = kind_name(e.kind, lang)
        lines.append(f"| {e.at:%Y-%m-%d %H:%M:%S} | {e.actor} | {kind} | {text} |")
    return visible("\n".join(lines)) + "\n"


def render_summary(title: str, lines: Sequence[tuple[str, str]]) -> Panel:
    body = Table.grid(padding=(0, 1))
    body.add_column(style="bold", no_wrap=True)
    body.add_column(overflow="fold")
    for label, value in lines:
        body.add_row(Text(label), Prose(value))
    return Panel(body, title=Text(title), title_align="left", border_style="green")


_YES = {"y", "yes", "approve", "是", "批准"}
_NO = {"n", "no", "deny", "否", "拒绝"}


class ConsoleApprover:
    """Approve or deny at a prompt; with `approve_as` set, approves as that person without
    asking (scripted runs: `gpubot demo --approve-as alice`)."""

    def __init__(self, console: Console, approve_as: str | None, lang: Lang = Lang.EN) -> None:
        self.console = console
        self.approve_as = approve_as
        self.lang = lang

    def ask(self, request: ActionRequest) -> tuple[bool, str]:
        """(approved?, who). y/n, yes/no, approve/deny (and 是/否, 批准/拒绝) are answers;
        anything else is asked again, in the person's language."""
        self.console.print(render_request(request, self.lang))
        if self.approve_as:
            who = say(self.lang, "console.approved_as", who=self.approve_as)
            self.console.print(Text(f"  {who}", "green"))
            return True, self.approve_as
        question = say(self.lang, "console.ask", action=request.action.value, node=request.node)
        while True:
            answer = Prompt.ask(f"  {question}", console=self.console).strip().lower()
            if answer in _YES or answer in _NO:
                return answer in _YES, "you"
            self.console.print(Text(f"  {say(self.lang, 'console.ask_again')}", "yellow"))


class ConsoleChat:
    """The Chat port on a terminal: `gpubot serve --chat console` and the drills."""

    def __init__(self, console: Console, lang: Lang) -> None:
        self.console = console
        self.lang = lang

    def _incident(self, incident: Incident) -> str:
        return "[" + say(self.lang, "console.incident", id=incident.id) + "]"

    def post_diagnosis(
        self,
        incident: Incident,
        diagnosis: Diagnosis,
        requests: Sequence[ActionRequest],
        under: Incident | None = None,
    ) -> str | None:
        key = "console.incident_in_thread" if under is not None else "console.incident"
        said = say(self.lang, key, id=incident.id, under=under.id if under else "")
        self.console.print(Text(said, style="bold"))
        print_diagnosis(diagnosis, self.console, EVIDENCE_SHOWN)
        for request in requests:
            self.console.print(render_request(request, self.lang))
        return f"console:{incident.id}"

    def post_thread(self, incident: Incident, text: str) -> None:
        self.console.print(Prose(f"  {self._incident(incident)} {text}"))

    def ask_again(
        self, incident: Incident | None, old: ActionRequest, new: ActionRequest, why: str
    ) -> None:
        prefix = f"  {self._incident(incident)} " if incident else "  "
        self.console.print(Prose(f"{prefix}{why}"))
        self.console.print(render_request(new, self.lang))

    def revise_diagnosis(
        self,
        incident: Incident,
        diagnosis: Diagnosis,
        requests: Sequence[ActionRequest],
        note: str,
    ) -> None:
        self.console.print(Prose(f"  {self._incident(incident)} {note}", style="bold"))
        print_diagnosis(diagnosis, self.console, EVIDENCE_SHOWN)
        for request in requests:
            self.console.print(render_request(request, self.lang))

    def withdraw(self, incident: Incident, request: ActionRequest, why: str) -> None:
        withdrawn = say(self.lang, "console.withdrawn", id=request.id, why=why)
        self.console.print(Prose(f"  {self._incident(incident)} {withdrawn}"))

    def post_notice(self, text: str, monospace: bool = False) -> None:
        # A terminal's font is fixed-width already: `monospace` changes nothing here.
        self.console.print(Prose(text, style="yellow"))

    def post_result(self, request: ActionRequest, text: str) -> None:
        request_id = say(self.lang, "console.request_id", id=request.id)
        self.console.print(Prose(f"  [{request_id}] {text}"))
