"""The one zh/en catalogue: every sentence gpubot says to a person, in English and Chinese,
assembled here from its parts by area (the chat, diagnoses, decisions and actions, the health
gate, incidents, the command line, files refused at the door, and the list separators they
share), and the few functions that say them.

Why one catalogue: `--lang zh` was half English because each module kept its own strings,
some never translated. Here a key without both languages, or with different placeholders in
each, fails `tests/unit/test_texts.py`, and so does a key two parts both hold. Rule texts
(titles, runbook steps) are not here: the rule files carry both languages and `gpubot rules
lint` checks them.

What it must never do: be branched on. Code decides on codes (an outcome, an enum) and only
then renders a sentence; a rendered sentence changes with the language.
"""

from __future__ import annotations

import re
from string import Formatter
from typing import get_args

from bot.model import IncidentState, Lang, Severity, Stage, TimelineKind
from bot.texts import (
    chat_texts,
    cli_texts,
    decision_texts,
    diagnosis_texts,
    gate_texts,
    incident_texts,
    input_texts,
    shared_texts,
)

PARTS: dict[str, dict[str, dict[Lang, str]]] = {
    part.__name__: part.TEXTS
    for part in (
        chat_texts,
        diagnosis_texts,
        decision_texts,
        gate_texts,
        incident_texts,
        cli_texts,
        input_texts,
        shared_texts,
    )
}
"""Each part's module name -> its keys; every key in exactly one part."""

TEXTS: dict[str, dict[Lang, str]] = {
    key: texts for part in PARTS.values() for key, texts in part.items()
}
"""Key -> language -> a `str.format` template; the same placeholders in both languages."""

STAGES: dict[Stage, dict[Lang, str]] = {stage: TEXTS[f"stage.{stage}"] for stage in Stage}
"""The runbook's lifecycle stages as a person reads them (the value is the code)."""

SEVERITIES: dict[Severity, dict[Lang, str]] = {
    severity: TEXTS[f"severity.{severity}"] for severity in Severity
}
"""A diagnosis' severity as its message's header says it (the value is the code)."""

STATES: dict[IncidentState, dict[Lang, str]] = {
    state: TEXTS[f"state.{state}"] for state in IncidentState
}

KINDS: dict[str, dict[Lang, str]] = {kind: TEXTS[f"kind.{kind}"] for kind in get_args(TimelineKind)}
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
        for literal, name, _, _ in Formatter().parse(TEXTS[key][Lang.EN])
    )
    found = re.fullmatch(pattern, text, re.DOTALL)
    return found.groupdict() if found is not None else None


def stage_name(stage: Stage, lang: Lang) -> str:
    return STAGES[stage][lang]


def severity_name(severity: Severity, lang: Lang) -> str:
    return SEVERITIES[severity][lang]


def state_name(state: str, lang: Lang) -> str:
    """An `IncidentState` value as a person reads it; an unknown value as itself."""
    try:
        return STATES[IncidentState(state)][lang]
    except ValueError:
        return state


def kind_name(kind: str, lang: Lang) -> str:
    return KINDS.get(kind, {}).get(lang, kind)
