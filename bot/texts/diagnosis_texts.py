"""The catalogue's part for diagnoses: the names of the runbook's lifecycle stages.

Why a part of its own: a diagnosis is what the on-call reads first, and the words it is made
of are said by the diagnosis itself, not by the chat that shows it. What it must never do:
hold a rule's own text (titles, causes, runbook steps: the rule files carry both languages
and `gpubot rules lint` checks them), or import anything but the shared nouns: `bot.texts`
assembles it.
"""

from __future__ import annotations

from bot.model import Lang

EN, ZH = Lang.EN, Lang.ZH

TEXTS: dict[str, dict[Lang, str]] = {
    # -- the runbook's lifecycle stages (the code after the dot is the `Stage` value)
    "stage.join": {EN: "join", ZH: "加入"},
    "stage.drain": {EN: "drain", ZH: "排空"},
    "stage.reboot": {EN: "reboot", ZH: "重启"},
    "stage.upgrade": {EN: "upgrade", ZH: "升级"},
    "stage.mig": {EN: "MIG change", ZH: "MIG 变更"},
    "stage.rejoin": {EN: "rejoin", ZH: "重新加入"},
    "stage.steady": {EN: "steady", ZH: "稳定运行"},
}
