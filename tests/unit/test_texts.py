"""The zh/en catalogue: every sentence in both languages, with the same blanks to fill."""

from __future__ import annotations

import re
from string import Formatter
from typing import get_args

import pytest

from bot.model import IncidentState, Lang, Stage, TimelineKind
from bot.texts import KINDS, STAGES, STATES, TEXTS, say


def _blanks(template: str) -> set[str]:
    return {name for _, name, _, _ in Formatter().parse(template) if name is not None}


def _words(template: str) -> str:
    """The template's own words: blanks, flags and quoted commands left out."""
    text = re.sub(r"\{[^}]*\}|`[^`]*`|--[\w-]+", "", template)
    return " ".join(re.findall(r"[A-Za-z]{3,}", text))


@pytest.mark.parametrize("key", sorted(TEXTS))
def test_every_sentence_is_in_both_languages_with_the_same_blanks(key: str) -> None:
    texts = TEXTS[key]
    assert set(texts) == set(Lang), f"{key} is not in every language"
    assert all(t.strip() for t in texts.values()), f"{key} has an empty text"
    assert _blanks(texts[Lang.EN]) == _blanks(texts[Lang.ZH]), f"{key}: different blanks"
    if _words(texts[Lang.EN]):
        # Chinese that is the English sentence again is an untranslated sentence.
        assert re.search(r"[\u4e00-\u9fff]", texts[Lang.ZH]), f"{key}: untranslated zh"


def test_every_stage_state_and_timeline_kind_has_a_name_in_both_languages() -> None:
    for names, codes in (
        (STAGES, list(Stage)),
        (STATES, list(IncidentState)),
        (KINDS, list(get_args(TimelineKind))),
    ):
        assert set(names) == set(codes)
        for code in codes:
            assert set(names[code]) == set(Lang), code  # type: ignore[index]
            assert re.search(r"[\u4e00-\u9fff]", names[code][Lang.ZH]), code  # type: ignore[index]


def test_say_fills_the_sentence_in_the_language_asked() -> None:
    assert say(Lang.EN, "exec.gate.passed", node="gpu-a2") == "health gate passed for gpu-a2"
    assert say(Lang.ZH, "exec.gate.passed", node="gpu-a2") == "gpu-a2 的健康门禁通过"
