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


def test_the_approval_count_in_the_thread_reads_in_either_language() -> None:
    from bot.chat.slack._buttons import _approvals_so_far

    assert _approvals_so_far(["<@U1>"], 2) == "1 of 2 approvals: <@U1>; needs a second approver"
    assert _approvals_so_far(["<@U1>"], 3) == "1 of 3 approvals: <@U1>; needs 2 more approvers"
    assert _approvals_so_far(["<@U1>", "<@U2>"], 3) == (
        "2 of 3 approvals: <@U1>, <@U2>; needs 1 more approver"
    )
    assert _approvals_so_far(["<@U1>"], 2, Lang.ZH) == "已有 1/2 个批准：<@U1>；还需要第二位审批人"
