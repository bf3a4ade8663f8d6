"""A diagnosis as a Slack message: Block Kit built with `slack_sdk.models.blocks`.

Why this module exists: the diagnosis is what a person reads at 3 a.m. before approving a
cordon or a drain, so it must say the same as the console (the four questions, stage,
evidence, runbook, blockers, scope) and it must always be a message Slack accepts. Slack
rejects a whole message for one text that is a character too long, so every text here is cut
to its Block Kit limit *before* it is built, long lists end with "… N more in the timeline",
and every block passes slack_sdk's own validation (`to_dict()` raises otherwise).

What it must never do: decide, act, talk to Slack, or word a text itself (its labels are
the catalogue's `message.*`, as the console's are). Every function is pure: values in,
blocks out. Which click is allowed is the approval engine's (`bot.approval`), sending is
the adapter's.

The buttons, and what an interaction handler gets back (`action_id` → `value`):

- `gpubot.approve` → the `ActionRequest.id` (one button per request: "Approve drain" ...)
- `gpubot.deny` → the `ActionRequest.id` it denies (next to its approve button)
- `gpubot.snooze` → the incident id; without one, `diagnosis_key(d)` (`rule/subject`)
- `gpubot.timeline` → the same incident id or key as snooze

Each request has its own actions block (`block_id` `gpubot.request.<id>`), because an
`action_id` must be unique within a block; snooze and timeline share the block
`gpubot.incident`. Destructive approvals (cordon, drain, force, uncordon past a failed health
gate) carry a confirm dialog saying what will happen and the request's risk.

Lengths are counted in UTF-16 code units, as Slack's limits are, which is stricter than
slack_sdk's `len()` for emoji outside the BMP.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ConfirmObject,
    ContextBlock,
    DividerBlock,
    HeaderBlock,
    MarkdownTextObject,
    PlainTextObject,
    RichTextBlock,
    RichTextElementParts,
    RichTextPreformattedElement,
    RichTextSectionElement,
    SectionBlock,
)

from bot.chat.console import EVIDENCE_SHOWN, QUESTIONS, proposal_lines
from bot.model import Action, ActionRequest, Diagnosis, Lang, Severity
from bot.outside_text import shown_name, visible
from bot.texts import say, severity_name, stage_name

APPROVE_ACTION = "gpubot.approve"
DENY_ACTION = "gpubot.deny"
SNOOZE_ACTION = "gpubot.snooze"
TIMELINE_ACTION = "gpubot.timeline"
ACTION_IDS = frozenset({APPROVE_ACTION, DENY_ACTION, SNOOZE_ACTION, TIMELINE_ACTION})

REQUEST_BLOCK_PREFIX = "gpubot.request."
REQUEST_INFO_BLOCK_PREFIX = "gpubot.request-info."
INCIDENT_BLOCK_ID = "gpubot.incident"
DECISION_BLOCK_PREFIX = "gpubot.decision."

# Block Kit limits (https://docs.slack.dev/reference/block-kit/)
MAX_BLOCKS = 50
SECTION_TEXT_MAX = 3000
HEADER_TEXT_MAX = 150
FIELDS_MAX = 10
FIELD_TEXT_MAX = 2000
BUTTON_TEXT_MAX = 75
BUTTON_VALUE_MAX = 2000
CONFIRM_TITLE_MAX = 100
CONFIRM_TEXT_MAX = 300
CONFIRM_BUTTON_MAX = 30
CONTEXT_ELEMENTS_MAX = 10
BLOCK_ID_MAX = 255

# Our own choices, to keep a message readable (the rest is in the timeline).
BLOCKERS_SHOWN = 10
RUNBOOK_TEXT_MAX = SECTION_TEXT_MAX
"""Slack documents no limit for rich text; we hold the runbook to a section's."""
LINE_MAX = 500
"""One evidence or blocker line: a single huge line must not crowd out the others."""
FALLBACK_TEXT_MAX = 500

Shown = Literal["approved", "denied", "expired"]
"""How a decided request reads where its buttons were."""

_USER_ID = re.compile(r"<?@?([UW][A-Z0-9]+)>?")
_ICON = {Severity.CRITICAL: "🔴", Severity.WARNING: "🟠", Severity.INFO: "🔵"}

# -- lengths and escaping ---------------------------------------------------------------


def _units(text: str) -> int:
    """Length as Slack counts it: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def fit(text: str, limit: int, *, escaped: bool = False) -> str:
    """`text` cut to at most `limit` UTF-16 units, ending in "…" when cut.

    With `escaped`, the text is mrkdwn with `&amp;`-style entities, mentions and `LITERAL`s;
    a cut never leaves half of one."""
    if _units(text) <= limit:
        return text
    room = limit - 1  # for the "…"
    end = 0
    for char in text:
        room -= 2 if ord(char) > 0xFFFF else 1
        if room < 0:
            break
        end += 1
    cut = text[:end]
    if escaped:
        amp = cut.rfind("&")
        if amp != -1 and ";" not in cut[amp:]:
            cut = cut[:amp]
        # Every `<` of escaped text opens a mention or a `LITERAL`: never cut one in half.
        opened = cut.rfind("<")
        if opened != -1 and ">" not in cut[opened:]:
            cut = cut[:opened]
    return cut + "…"


_FORMATTING = re.compile(r"[*_~`]+")
_QUOTE_AT_LINE_START = re.compile(r"^&gt;", re.MULTILINE)
_BACKTICKS = re.compile(r"(`+)")
_CODE_BLOCK_FENCE = re.compile(r"``+")
LITERAL = "<!date^00000000^{{_}}|{text}>"
"""How mrkdwn shows characters as themselves: Slack has no escape for `*`, `_`, `~` and
backticks, but it shows a date's fallback text as plain text, unformatted, when the date
cannot be rendered, and `{_}` is no date token (the trick jsx-slack's `<Escape>` uses)."""


def _entities(text: str) -> str:
    """`&`, `<` and `>` as Slack asks them escaped: the characters of its links, mentions and
    commands (`<!channel>`, `<!date^...>`, `<https://...|label>`)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape(text: str) -> str:
    """Text from outside (alert labels, object names, people's words) into mrkdwn, shown as
    it is: `<`, `>` and `&` as entities, each run of `*`, `_`, `~` and backticks as a date's
    fallback (`LITERAL`), a `>` that starts a line kept from quoting by a soft hyphen, and
    every invisible or bidi character as its escape (`bot.outside_text.visible`): a
    right-to-left override in a label must not turn the rest of the message around."""
    text = _FORMATTING.sub(lambda run: LITERAL.format(text=run.group(0)), _entities(visible(text)))
    return _QUOTE_AT_LINE_START.sub("\u00ad&gt;", text)


def code(text: str) -> str:
    """Text from outside as inline code: within a code span nothing but entities is read, but
    a backtick would end the span, so the text is split at each run of backticks and the run
    is shown between the spans (escaped)."""
    return "".join(
        escape(part) if part.startswith("`") else f"`{_entities(part)}`"
        for part in _BACKTICKS.split(visible(text))
        if part
    )


def code_block(text: str, limit: int) -> str:
    """Text from outside inside a ```code block``` of at most `limit` units: entities only (a
    block shows the rest as it is); a run of backticks inside, which could close the block,
    is broken up by zero-width spaces."""
    fenced = _CODE_BLOCK_FENCE.sub(
        lambda run: "\u200b".join(run.group(0)), _entities(visible(text))
    )
    return f"```{fit(fenced, limit - 6, escaped=True)}```"


def _mrkdwn(text: str, limit: int) -> MarkdownTextObject:
    return MarkdownTextObject(text=fit(text, limit, escaped=True))


def _plain(text: str, limit: int) -> PlainTextObject:
    return PlainTextObject(text=fit(visible(text), limit), emoji=True)


def _block_key(value: str, prefix: str) -> str:
    """A block id for `value` under `prefix`, hashed when it would pass Slack's 255."""
    if len(prefix) + len(value) <= BLOCK_ID_MAX:
        return prefix + value
    return prefix + hashlib.sha256(value.encode()).hexdigest()[:24]


def _bullets(lines: Sequence[str], heading: str, shown: int, lang: Lang) -> str:
    """`*heading*` and up to `shown` bullet lines, within a section's 3000, then the pointer
    to the timeline for the rest."""
    reserve = _units("\n" + say(lang, "message.more", n=len(lines)))
    text = f"*{escape(heading)}*"
    kept = 0
    for line in lines[:shown]:
        item = "\n• " + fit(escape(line), LINE_MAX, escaped=True)
        if _units(text + item) + reserve > SECTION_TEXT_MAX:
            break
        text += item
        kept += 1
    if kept < len(lines):
        text += "\n" + say(lang, "message.more", n=len(lines) - kept)
    return text


# -- small texts -------------------------------------------------------------------------


def _lang(d: Diagnosis, lang: Lang | None) -> Lang:
    return lang or d.lang


def subject(d: Diagnosis, lang: Lang) -> str:
    """What the diagnosis is about: `gpu-a2 (a100-east)`, `pool a100-east`, `cluster`. A
    node's name as `shown_name` writes it: one only alerts give may look like a real one."""
    if d.node:
        return shown_name(d.node) + (f" ({d.pool})" if d.pool else "")
    return say(lang, "message.pool", pool=d.pool) if d.pool else say(lang, "message.cluster")


def diagnosis_key(d: Diagnosis) -> str:
    """`rule/subject`: what snooze and timeline buttons carry before an incident id exists."""
    return f"{d.rule}/{d.node or d.pool or 'cluster'}"


def _what(request: ActionRequest) -> str:
    force = " --force" if request.force else ""
    return f"{request.action.value}{force} {request.node}"


def mention(user: str) -> str:
    """`<@U123>` for a Slack user id (bare or already `<@U123>`); anything else (the bot, a
    CLI user) as escaped plain text, so no name can smuggle in `<!channel>`."""
    found = _USER_ID.fullmatch(user)
    return f"<@{found.group(1)}>" if found else escape(user)


def _join(names: Sequence[str], lang: Lang) -> str:
    if len(names) <= 1:
        return "".join(names)
    return say(lang, "list.enumeration").join(names[:-1]) + say(lang, "list.and") + names[-1]


def _hhmm(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%H:%M")


def decision_text(
    request: ActionRequest,
    outcome: Shown,
    by: Sequence[str],
    at: datetime,
    lang: Lang,
) -> str:
    """Who decided what and when, as mrkdwn: `✅ drain gpu-a2 approved by <@U1> and <@U2> at
    03:12 UTC`. For `expired`, `by` is not used and `at` is when it expired."""
    return say(
        lang,
        f"message.decided.{outcome}",
        what=escape(_what(request)),
        who=_join([mention(u) for u in by], lang),
        time=_hhmm(at),
    )


def fallback_text(d: Diagnosis, lang: Lang | None = None) -> str:
    """The notification text (`chat.postMessage`'s `text`): severity, subject, symptom and
    scope, escaped for mrkdwn and short enough for a notification."""
    lang = _lang(d, lang)
    line = (
        f"{_ICON[d.severity]} {severity_name(d.severity, lang)} · {escape(subject(d, lang))}: "
        f"{escape(d.title)} — {escape(d.questions.scope)}"
    )
    return fit(line, FALLBACK_TEXT_MAX, escaped=True)


# -- buttons -----------------------------------------------------------------------------


def _destructive(request: ActionRequest) -> bool:
    return request.action in (Action.CORDON, Action.DRAIN) or request.override_gate


def _confirm(request: ActionRequest, lang: Lang) -> ConfirmObject:
    """What will happen, the risk, and until when the request holds: at most 300 units, the
    risk cut before the consequence is."""
    action = request.action.value + (" --force" if request.force else "")
    if request.action is Action.DRAIN:
        key = "message.confirm.force" if request.force else "message.confirm.drain"
        what = say(lang, key, node=request.node)
        if request.delete_emptydir_data:
            what += say(lang, "message.confirm.emptydir")
    elif request.action is Action.UNCORDON:
        anyway = request.override_gate
        key = "message.confirm.uncordon_anyway" if anyway else "message.confirm.uncordon"
        what = say(lang, key, node=request.node)
    else:
        what = say(lang, "message.confirm.cordon", node=request.node)
    expires = say(lang, "message.expires", time=_hhmm(request.expires_at))
    body = f"{what}\n{expires}"
    if request.risk:
        room = CONFIRM_TEXT_MAX - _units(body) - 1
        risk = say(lang, "message.risk", risk=request.risk)
        if room > _units("…") + 8:
            body = f"{what}\n{fit(risk, room)}\n{expires}"
    return ConfirmObject(
        title=_plain(
            say(lang, "message.confirm.title", action=action, node=request.node),
            CONFIRM_TITLE_MAX,
        ),
        text=_plain(body, CONFIRM_TEXT_MAX),
        confirm=_plain(
            say(lang, "message.confirm.ok", action=request.action.value), CONFIRM_BUTTON_MAX
        ),
        deny=_plain(say(lang, "message.confirm.no"), CONFIRM_BUTTON_MAX),
        style="danger" if request.action is Action.DRAIN else None,
    )


def approve_label(request: ActionRequest, lang: Lang) -> str:
    """`Approve drain`, `批准 cordon`, `Approve drain --force`."""
    action = request.action.value + (" --force" if request.force else "")
    label = say(lang, "message.approve", action=action)
    if request.override_gate:
        label += say(lang, "message.override")
    return fit(label, BUTTON_TEXT_MAX)


def request_blocks(request: ActionRequest, lang: Lang) -> list[Block]:
    approve = ButtonElement(
        text=_plain(approve_label(request, lang), BUTTON_TEXT_MAX),
        action_id=APPROVE_ACTION,
        value=request.id,
        style="danger" if request.action is Action.DRAIN else "primary",
        confirm=_confirm(request, lang) if _destructive(request) else None,
    )
    deny = ButtonElement(
        text=_plain(say(lang, "message.deny"), BUTTON_TEXT_MAX),
        action_id=DENY_ACTION,
        value=request.id,
    )
    info = say(
        lang,
        "message.request",
        what=escape(_what(request)),
        who=mention(request.requested_by),
        time=_hhmm(request.expires_at),
        id=escape(request.id),
    )
    return [
        ActionsBlock(
            block_id=_block_key(request.id, REQUEST_BLOCK_PREFIX), elements=[approve, deny]
        ),
        ContextBlock(
            block_id=_block_key(request.id, REQUEST_INFO_BLOCK_PREFIX),
            elements=[_mrkdwn(info, SECTION_TEXT_MAX)],
        ),
    ]


def incident_block(value: str, lang: Lang) -> ActionsBlock:
    return ActionsBlock(
        block_id=INCIDENT_BLOCK_ID,
        elements=[
            ButtonElement(
                text=_plain(say(lang, "message.snooze"), BUTTON_TEXT_MAX),
                action_id=SNOOZE_ACTION,
                value=value,
            ),
            ButtonElement(
                text=_plain(say(lang, "message.timeline"), BUTTON_TEXT_MAX),
                action_id=TIMELINE_ACTION,
                value=value,
            ),
        ],
    )


# -- the message -------------------------------------------------------------------------


def _runbook(d: Diagnosis, heading: str, lang: Lang) -> RichTextBlock:
    """The steps as rich text, commands preformatted: nothing in a command is read as
    mrkdwn (a `*` in a glob, a backtick), so no escaping is needed or done."""
    bold = RichTextElementParts.TextStyle(bold=True)
    elements: list[RichTextSectionElement | RichTextPreformattedElement] = [
        RichTextSectionElement(elements=[RichTextElementParts.Text(text=heading, style=bold)])
    ]
    budget = (
        RUNBOOK_TEXT_MAX - _units(heading) - _units(say(lang, "message.more", n=len(d.runbook)))
    )
    kept = 0
    for number, step in enumerate(d.runbook, 1):
        step_text = fit(visible(f"{number}. {step.text}"), LINE_MAX)
        commands = "\n".join(fit(visible(c), LINE_MAX) for c in step.commands)
        cost = _units(step_text) + _units(commands)
        if cost > budget:
            break
        budget -= cost
        kept += 1
        elements.append(
            RichTextSectionElement(elements=[RichTextElementParts.Text(text=step_text)])
        )
        if commands:
            elements.append(
                RichTextPreformattedElement(elements=[RichTextElementParts.Text(text=commands)])
            )
    if kept < len(d.runbook):
        elements.append(
            RichTextSectionElement(
                elements=[
                    RichTextElementParts.Text(
                        text=say(lang, "message.more", n=len(d.runbook) - kept),
                        style=RichTextElementParts.TextStyle(italic=True),
                    )
                ]
            )
        )
    return RichTextBlock(block_id="gpubot.runbook", elements=elements)


def _proposals_text(d: Diagnosis, heading: str, lang: Lang) -> str:
    return f"*{escape(heading)}*: " + escape("; ".join(proposal_lines(d, lang)))


def diagnosis_blocks(
    d: Diagnosis,
    requests: Sequence[ActionRequest] = (),
    lang: Lang | None = None,
    *,
    incident: str | None = None,
) -> list[Block]:
    """The message for one diagnosis and the approvable requests made of its proposals.

    `lang` names the labels' language (default: the diagnosis'); the diagnosis' own texts are
    in the language it was made in. `incident` is what snooze and timeline carry (default:
    the requests' incident, else `diagnosis_key(d)`). At most `MAX_BLOCKS - 1` blocks: one
    slot stays free for `decided_blocks`."""
    lang = _lang(d, lang)

    def label(key: str) -> str:
        return say(lang, f"message.{key}")

    severity = severity_name(d.severity, lang)
    header = f"{_ICON[d.severity]} {severity} · {subject(d, lang)} · {d.title}"
    stage = escape(stage_name(d.stage, lang))
    context = f"{escape(label('stage'))}: *{stage}* · {label('rule')} {code(d.rule)}"
    if d.expected:
        context += f" · _{label('expected')}_"
    blocks: list[Block] = [
        HeaderBlock(block_id="gpubot.header", text=_plain(header, HEADER_TEXT_MAX)),
        ContextBlock(block_id="gpubot.context", elements=[_mrkdwn(context, SECTION_TEXT_MAX)]),
        SectionBlock(block_id="gpubot.summary", text=_mrkdwn(escape(d.summary), SECTION_TEXT_MAX)),
        SectionBlock(
            block_id="gpubot.questions",
            fields=[
                _mrkdwn(
                    f"*{escape(label(key))}*\n{escape(getattr(d.questions, key))}", FIELD_TEXT_MAX
                )
                for key in QUESTIONS
            ],
        ),
    ]
    if d.evidence:
        evidence = _bullets(d.evidence, label("evidence"), EVIDENCE_SHOWN, lang)
        blocks.append(SectionBlock(block_id="gpubot.evidence", text=_mrkdwn(evidence, 3000)))
    if d.blockers:
        lines = [
            f"{b.kind}: {b.namespace}/{b.pod} — {b.detail}"
            + (f" [{b.bypass_flag}]" if b.bypass_flag else "")
            for b in d.blockers
        ]
        blockers = _bullets(lines, label("blockers"), BLOCKERS_SHOWN, lang)
        blocks.append(SectionBlock(block_id="gpubot.blockers", text=_mrkdwn(blockers, 3000)))
    check_first = f"*{escape(label('check_first'))}*: {escape(d.check_first)}"
    blocks.append(
        SectionBlock(block_id="gpubot.check-first", text=_mrkdwn(check_first, SECTION_TEXT_MAX))
    )
    if d.runbook:
        blocks.append(_runbook(d, label("runbook"), lang))
    if d.rollback:
        rollback = f"*{escape(label('rollback'))}*: {escape(d.rollback)}"
        blocks.append(
            SectionBlock(block_id="gpubot.rollback", text=_mrkdwn(rollback, SECTION_TEXT_MAX))
        )
    if not requests and d.proposals:
        proposed = _proposals_text(d, label("proposals"), lang)
        blocks.append(
            SectionBlock(block_id="gpubot.proposed", text=_mrkdwn(proposed, SECTION_TEXT_MAX))
        )
    blocks.append(DividerBlock(block_id="gpubot.divider"))

    # what is left, less the incident row, a "more" note and the slot for a decision
    room = MAX_BLOCKS - 1 - len(blocks) - 1
    shown = list(requests)
    if len(shown) * 2 > room:
        shown = shown[: (room - 1) // 2]
    for request in shown:
        blocks.extend(request_blocks(request, lang))
    if len(shown) < len(requests):
        more = say(lang, "message.more", n=len(requests) - len(shown))
        blocks.append(ContextBlock(block_id="gpubot.requests-more", elements=[_mrkdwn(more, 3000)]))
    value = incident or next((r.incident for r in requests if r.incident), None)
    blocks.append(incident_block(fit(value or diagnosis_key(d), BUTTON_VALUE_MAX), lang))
    return blocks


# -- after a decision ---------------------------------------------------------------------


def _parsed(blocks: Sequence[Block | dict[str, Any]]) -> list[Block]:
    out = []
    for block in blocks:
        parsed = Block.parse(block)
        if parsed is not None:
            out.append(parsed)
    return out


def _request_row_of(block: Block, request_id: str | None) -> str | None:
    """The request id of a request's actions row (`None` if `block` is not one, or is
    another request's)."""
    if not isinstance(block, ActionsBlock):
        return None
    for element in block.elements:
        action_id = getattr(element, "action_id", None)
        value = getattr(element, "value", None)
        if action_id in (APPROVE_ACTION, DENY_ACTION) and isinstance(value, str):
            return value if request_id in (None, value) else None
    return None


def decided_blocks(
    original: Sequence[Block | dict[str, Any]] | Diagnosis,
    decision: str,
    *,
    request_id: str | None = None,
) -> list[Block]:
    """The message after a decision: the buttons of `request_id` (of every request, if
    `None`) and their request lines replaced by `decision` (mrkdwn, e.g. from
    `decision_text`, passed as is: mentions must stay mentions). Snooze and timeline stay.

    `original` is what was posted: slack_sdk blocks, or the dicts Slack sends back in an
    interaction's `message.blocks`, or the diagnosis to render afresh. Blocks slack_sdk does
    not know are dropped."""
    blocks = diagnosis_blocks(original) if isinstance(original, Diagnosis) else _parsed(original)
    decided = sum(1 for b in blocks if (b.block_id or "").startswith(DECISION_BLOCK_PREFIX))
    note = SectionBlock(
        block_id=f"{DECISION_BLOCK_PREFIX}{decided}",
        text=_mrkdwn(decision, SECTION_TEXT_MAX),
    )
    rows = {rid for b in blocks if (rid := _request_row_of(b, request_id)) is not None}
    info_ids = {_block_key(rid, REQUEST_INFO_BLOCK_PREFIX) for rid in rows}
    out: list[Block] = []
    placed = False
    for block in blocks:
        if _request_row_of(block, request_id) is not None:
            if not placed:
                out.append(note)
                placed = True
            continue
        if block.block_id in info_ids:
            continue
        out.append(block)
    if not placed:
        at = next((i for i, b in enumerate(out) if b.block_id == INCIDENT_BLOCK_ID), len(out))
        out.insert(at, note)
    return out[:MAX_BLOCKS]
