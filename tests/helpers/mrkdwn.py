"""What a Slack client shows for a mrkdwn text, closely enough to tell formatting from
literal characters (docs.slack.dev "Formatting text for app surfaces").

Slack reads, in this order: `<...>` sequences (links, mentions, `<!date^ts^format|fallback>`,
whose fallback is shown as plain text when the format cannot be rendered), the entities
`&amp;`, `&lt;` and `&gt;`, then `*bold*`, `_italic_`, `~strike~` and `` `code` `` when the
markers stand at word boundaries. This helper does the same and reports what was formatted,
so a test can say "the label `*bold*` is shown as `*bold*`, not in bold"."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_SEQUENCE = re.compile(r"<([^<>]*)>")
_DATE = re.compile(r"!date\^\d+\^([^|^]*)(?:\^[^|]*)?\|(.*)", re.S)
_VALID_DATE_TOKEN = re.compile(
    r"\{(date_num|date_slash|date|date_short|date_long|date_pretty|date_short_pretty|"
    r"date_long_pretty|date_long_full|day_divider_pretty|time|time_secs|ago)\}"
)
# A marker opens after a start, a space or punctuation, and closes before an end, a space or
# punctuation; the text between does not start or end with a space.
_FORMAT = re.compile(
    r"(?<![\w*_~`])([*_~`])(?=\S)([^\n]*?\S)\1(?![\w*_~`])",
)
_KIND = {"*": "bold", "_": "italic", "~": "strike", "`": "code"}
# Characters that stand for literal text while the formatting is looked for: Unicode's
# private use area, which nothing gpubot sends contains.
_PRIVATE = 0xE000


@dataclass
class Shown:
    text: str
    """The characters a person reads."""
    formatted: list[tuple[str, str]] = field(default_factory=list)
    """(kind, text) of each bold, italic, strike or code span."""
    live: list[str] = field(default_factory=list)
    """Mentions, links and dates Slack acts on (`@channel`, a user, a URL, a date)."""


def shown(mrkdwn: str) -> Shown:
    literals: list[str] = []
    live: list[str] = []

    def hold(text: str) -> str:
        literals.append(text)
        return chr(_PRIVATE + len(literals) - 1)

    def sequence(match: re.Match[str]) -> str:
        inner = match.group(1)
        date = _DATE.fullmatch(inner)
        if date is not None:
            if _VALID_DATE_TOKEN.search(date.group(1)):
                live.append(inner)
                return hold("<a date>")
            return hold(_decoded(date.group(2)))  # the fallback, as plain text
        live.append(inner)
        return hold(_decoded(inner.split("|", 1)[-1]))

    text = _decoded(_SEQUENCE.sub(sequence, mrkdwn))
    formatted: list[tuple[str, str]] = []
    while True:
        found = _FORMAT.search(text)
        if found is None:
            break
        marker, inner = found.group(1), found.group(2)
        formatted.append((_KIND[marker], _restored(inner, literals)))
        text = text[: found.start()] + hold(inner) + text[found.end() :]
    return Shown(_restored(text, literals), formatted, live)


def _decoded(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _restored(text: str, literals: list[str]) -> str:
    while any(_PRIVATE <= ord(c) < _PRIVATE + len(literals) for c in text):
        text = "".join(
            literals[ord(c) - _PRIVATE] if _PRIVATE <= ord(c) < _PRIVATE + len(literals) else c
            for c in text
        )
    return text
