"""The slash command answers in the configured language (issue 19 item 7)."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any, cast

import pytest

from bot.chat.slack._command import handle_command
from bot.model import Lang


def _answer(lang: Lang, text: str, open_incidents: list[Any]) -> str:
    said: list[str] = []
    store = SimpleNamespace(incidents=lambda **_: open_incidents)
    h = SimpleNamespace(
        lang=lang, settings=SimpleNamespace(command="/gpubot"), engine=SimpleNamespace(store=store)
    )
    handle_command(cast(Any, h), "U1", text, lambda **kw: said.append(kw["text"]))
    [answer] = said
    return answer


@pytest.mark.parametrize("text", ["frobnicate", "help", "status", "incidents"])
def test_the_slash_command_answers_in_chinese(text: str) -> None:
    answer = _answer(Lang.ZH, text, [])
    prose = re.sub(r"`[^`]*`|\*[^*]*\*", "", answer)
    assert re.search(r"[\u4e00-\u9fff]", prose), answer
    assert not re.search(r"\b(Unknown|open incidents|propose|must approve)\b", prose), answer


def test_the_english_help_is_unchanged() -> None:
    answer = _answer(Lang.EN, "frobnicate", [])
    assert answer.startswith("Unknown subcommand `frobnicate`.\n*gpubot* — `/gpubot <subcommand>`")
    assert answer.endswith("• `help` — this")
    assert _answer(Lang.EN, "status", []) == "No open incidents."
