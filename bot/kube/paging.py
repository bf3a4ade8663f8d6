"""A list read page by page, as the API server hands out a large one.

Why a module of its own: a list of 100,000 pods comes in pages of 500 joined by continue
tokens, each page's items lacking their kind and apiVersion (the snapshot parser needs both),
and a caller that only counts or indexes must not hold the whole list. How a list is walked is
the same for every kind, so it is written once, apart from which call lists the kind
(`bot.kube.kinds`) and how its failures are told (`bot.kube.translating`).

What it must never do: import the kubernetes client (it is given the list call), retry a page,
or keep the items when a caller takes them one at a time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from bot.kube_objects import Obj, meta

PAGE_SIZE = 500


def read_pages(
    lister: Callable[..., Any],
    kind: str,
    label_selector: str,
    field_selector: str,
    timeout_s: float,
    each: Callable[[Obj], None] | None = None,
) -> tuple[list[Obj], str]:
    """The items (none kept when `each` takes them as each page arrives) and the list's
    resourceVersion, to watch from."""
    items: list[Obj] = []
    token: str | None = None
    while True:
        response = lister(
            label_selector=label_selector or None,
            field_selector=field_selector or None,
            limit=PAGE_SIZE,
            _continue=token,
            _preload_content=False,
            _request_timeout=timeout_s,
        )
        page = json.loads(response.data)
        api_version = page.get("apiVersion", "v1")
        for item in page.pop("items", None) or []:
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", api_version)
            if each is None:
                items.append(item)
            else:
                each(item)
        token = meta(page).get("continue")
        if not token:
            return items, str(meta(page).get("resourceVersion", ""))
