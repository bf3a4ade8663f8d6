"""The catalogue's part for the small words every area joins its sentences with: list
separators, which differ by language (`, ` against `，` and `、`).

Why a part of its own: a separator belongs to no room, and a room that wrote its own
`"，" if zh else ", "` had a language branch of its own. What it must never do: hold a
sentence (a sentence belongs to the part of the room that says it), or import anything but
the shared nouns: `bot.texts` assembles it.
"""

from __future__ import annotations

from bot.model import Lang

EN, ZH = Lang.EN, Lang.ZH

TEXTS: dict[str, dict[Lang, str]] = {
    # -- between the items of a list: clauses or counts (a Chinese comma), names of one kind
    # (the enumeration comma), items that hold commas themselves (a semicolon), the last of
    # several names (and)
    "list.comma": {EN: ", ", ZH: "，"},
    "list.enumeration": {EN: ", ", ZH: "、"},
    "list.semicolon": {EN: "; ", ZH: "；"},
    "list.and": {EN: " and ", ZH: " 和 "},
}
