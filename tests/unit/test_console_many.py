"""A large result on a terminal: panels up to PANELS_MAX, Markdown past it."""

from __future__ import annotations

import io

from rich.console import Console

from bot.chat.console import PANELS_MAX, print_diagnoses, render_markdown
from bot.model import Lang
from tests.helpers.builders import diagnosis


def _printed(count: int) -> str:
    out = io.StringIO()
    diagnoses = [diagnosis(node=f"gpu-a{i}") for i in range(count)]
    print_diagnoses(diagnoses, Console(file=out, width=100), Lang.EN)
    return out.getvalue()


def test_a_few_diagnoses_are_drawn_as_panels() -> None:
    shown = _printed(PANELS_MAX)
    assert shown.count("╭") == PANELS_MAX and "Markdown" not in shown


def test_many_diagnoses_are_printed_as_markdown_saying_so() -> None:
    count = PANELS_MAX + 1
    shown = _printed(count)
    assert "╭" not in shown
    first, rest = shown.split("\n\n", 1)
    assert first == f"{count} diagnoses, shown as Markdown (up to {PANELS_MAX} are drawn as panels)"
    diagnoses = [diagnosis(node=f"gpu-a{i}") for i in range(count)]
    assert rest == render_markdown(diagnoses, Lang.EN) + "\n"
    assert all(f"gpu-a{i} " in rest for i in range(count))
