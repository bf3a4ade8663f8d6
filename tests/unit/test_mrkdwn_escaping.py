"""Outside text in Slack is shown as it is (issue 15 item 5): every mrkdwn control character,
not only `<`, `>` and `&`. Read through tests/helpers/mrkdwn.py, which shows mrkdwn as a Slack
client does: what is formatted, what is a live mention or date, and the characters read."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from slack_sdk.models.blocks import Block

from bot.chat.blocks import code, diagnosis_blocks, escape, fallback_text, fit
from tests.helpers.builders import diagnosis
from tests.helpers.mrkdwn import shown

HOSTILE = "*bold* _it_ ~gone~ `code` <!channel> <!date^00000000^{_}|X> & > quote"


def _mrkdwn(blocks: list[Block]) -> list[str]:
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("type") == "mrkdwn":
                found.append(value["text"])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk([b.to_dict() for b in blocks])
    return found


def test_a_diagnosis_shows_outside_text_literally_and_only_its_own_headings_formatted() -> None:
    d = diagnosis().model_copy(
        update={
            "summary": HOSTILE,
            "evidence": [HOSTILE, "> " + HOSTILE],
            "check_first": HOSTILE,
        }
    )
    texts = [shown(t) for t in _mrkdwn(diagnosis_blocks(d))]
    everything = "\n".join(t.text for t in texts)
    assert everything.count(HOSTILE) >= 3
    assert not [live for t in texts for live in t.live]
    outside = {"bold", "it", "gone", "code"}
    assert not [f for t in texts for f in t.formatted if f[1] in outside]
    # gpubot's own formatting stays: headings in bold, the rule as code.
    assert ("bold", "Evidence") in [f for t in texts for f in t.formatted]
    assert ("code", "gpu-fell-off-bus") in [f for t in texts for f in t.formatted]
    # A line starting with ">" is not a quote: a soft hyphen stands before it.
    assert "\n• \u00ad> " in everything or "\u00ad>" in everything
    notice = shown(fallback_text(d.model_copy(update={"title": HOSTILE})))
    assert HOSTILE in notice.text and not notice.formatted and not notice.live


def test_a_backtick_cannot_close_a_code_span() -> None:
    seen = shown(f"rule {code('a`*b*`c')} done")
    assert seen.text == "rule a`*b*`c done"
    assert [kind for kind, _ in seen.formatted] == ["code", "code", "code"]
    assert ("bold", "b") not in seen.formatted


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.sampled_from("ab *_~`<>&!|^{}\n"), max_size=60))
def test_whatever_the_text_escaped_it_reads_as_itself(text: str) -> None:
    seen = shown(escape(text))
    assert seen.text.replace("\u00ad", "") == text
    assert seen.formatted == [] and seen.live == []


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.sampled_from("ab*_~`<>&"), max_size=80), limit=st.integers(5, 60))
def test_a_cut_never_leaves_half_an_escape(text: str, limit: int) -> None:
    cut = fit(escape(text), limit, escaped=True)
    assert len(cut.encode("utf-16-le")) // 2 <= limit
    seen = shown(cut.removesuffix("…"))
    assert text.startswith(seen.text.replace("\u00ad", ""))
    assert seen.formatted == [] and seen.live == []
