"""Looking up Xid codes in the catalog that `rules/xid.yaml` ships (data, not code)."""

from __future__ import annotations

from typing import Any

from bot.model import Action, Lang, Severity, XidFacts
from bot.rules.schema import XidCatalog

_FALLBACK = {
    "meaning": "unknown Xid",
    "action": "see NVIDIA's Xid catalog",
    "family": "generic",
    "proposal": Action.NONE.value,
    "severity": Severity.WARNING.value,
    "fatal": False,
    "marks_unhealthy": True,
}


def describe_xids(
    xids: list[XidFacts], catalog: XidCatalog | None, lang: Lang
) -> list[dict[str, Any]]:
    """Each Xid seen, with what the catalog says it means and what to do."""
    by_code = {
        code: entry for entry in (catalog.entries if catalog else []) for code in entry.codes
    }
    described = []
    for xid in xids:
        entry = by_code.get(xid.code)
        if entry is not None:
            info: dict[str, Any] = {
                "meaning": entry.meaning(lang),
                "action": entry.action(lang),
                "family": entry.family,
                "proposal": entry.proposal.value,
                "severity": entry.severity.value,
                "fatal": entry.fatal,
                "marks_unhealthy": entry.marks_unhealthy,
                "known": True,
            }
        elif catalog is not None:
            info = {
                "meaning": catalog.unknown.meaning(lang),
                "action": catalog.unknown.action(lang),
                "family": "generic",
                "proposal": catalog.unknown.proposal.value,
                "severity": catalog.unknown.severity.value,
                "fatal": False,
                "marks_unhealthy": True,
                "known": False,
            }
        else:
            info = {**_FALLBACK, "known": False}
        described.append({"code": xid.code, "gpu": xid.gpu or "", "source": xid.source, **info})
    return described
