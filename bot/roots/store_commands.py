"""The composition root of the commands that work on the store a running `gpubot serve`
keeps, from a terminal: approve and deny (a vote beside the chat's buttons), timeline,
digest and db upgrade.

It exists so that those commands only parse their options, print and pick the exit code:
here the store is opened and put together with the approval policy, the timelines and the
digest. It must never act on a vote (the leading serve executes what was approved), never
reach a cluster, and never create a store for a command that reads one: an empty store
answers every question with "nothing", which is a lie about the real one."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from bot.approval.voting import Voting
from bot.clock import utcnow
from bot.errors import InputError
from bot.incidents.digest import build_digest, digest_lines, next_run, still_out_note
from bot.incidents.timeline import Timeline
from bot.model import Incident, Lang, Outcome, TimelineEntry
from bot.store.sql import SqlStore, migrate

if TYPE_CHECKING:
    from bot.config import Settings
    from bot.store.actions import ExecutionRecord

# How often a command waiting on the leading serve looks at the store again.
_POLL_S = 0.5


@contextmanager
def _existing(store_url: str) -> Iterator[SqlStore]:
    store = SqlStore.open(store_url, create=False)
    try:
        yield store
    finally:
        store.close()


class Ballot:
    """Votes cast from a terminal on one store, for as long as one command runs.

    Owns the open store (closed when the `with` of `ballot` ends) and the `Voting` over it.
    Must never execute what it records (the leading serve does) nor decide who may vote (the
    policy `Voting` asks does): a command's vote is judged as a click in the chat."""

    def __init__(self, store: SqlStore, settings: Settings) -> None:
        self._store = store
        timeline = Timeline(store, utcnow, settings)
        self._voting = Voting(store, settings, timeline, clock=utcnow)

    def approve(self, request: str, as_user: str) -> Outcome:
        self._store.request(request)  # an unknown id is bad input, not a refusal
        return self._voting.record_approval(request, as_user)

    def deny(self, request: str, as_user: str, reason: str) -> Outcome:
        self._store.request(request)  # an unknown id is bad input, not a refusal
        return self._voting.record_denial(request, as_user, reason)

    def finished_execution(self, request: str, wait_s: float) -> ExecutionRecord | None:
        """The request's execution once it has finished, or None when `wait_s` ran out
        first: the leading serve picks recorded approvals up on its own schedule, and
        "approved" is not "done"."""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            execution = self._store.execution(request)
            if execution is not None and execution.finished_at is not None:
                return execution
            time.sleep(_POLL_S)
        return None


@contextmanager
def ballot(settings: Settings, store_url: str, *, create: bool) -> Iterator[Ballot]:
    """`create`: whether a missing SQLite store is made (deny has always opened the store as
    serve does; approve refuses a store that is not there)."""
    store = SqlStore.open(store_url, create=create)
    try:
        yield Ballot(store, settings)
    finally:
        store.close()


def timelines(store_url: str, what: str) -> list[tuple[Incident, list[TimelineEntry]]]:
    """The incident `what` is the id of, or every incident of the node it names, each with
    its timeline."""
    with _existing(store_url) as store:
        if what.isdigit():
            incidents = [store.incident(what)]
        else:
            incidents = store.incidents(node=what)
            if not incidents:
                raise InputError("INCIDENT|NODE", f"no incident with id or node {what!r}")
        return [(incident, store.timeline(incident.id)) for incident in incidents]


def digest_text(store_url: str, hours: float, zone_name: str, lang: Lang) -> str:
    """The digest serve posts daily, over the `hours` ending now, from the store alone: it
    reads no cluster, so its nodes out of service are those the timelines show, and it says
    so."""
    next_run(utcnow(), "00:00", zone_name)  # an unknown zone is bad input
    with _existing(store_url) as store:
        until = utcnow().astimezone(ZoneInfo(zone_name))
        found = build_digest(store, until, timedelta(hours=hours))
        told = digest_lines(found, lang)
        note = still_out_note(found, lang)
        return "\n".join([*told, note] if note else told)


def upgrade_schema(store_url: str) -> tuple[str | None, str]:
    """(revision before, revision after): the command reaches the store's migrations here,
    as every command reaches the store, so that no command module opens a database."""
    return migrate(store_url)
