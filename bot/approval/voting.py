"""A person's vote on a request, recorded: an approval judged against the policy at the
moment it arrives, or a denial, which is final and so needs someone the policy allows too
(`deny_refusal`): on every replica, since every path to a decision comes through here.

Nothing here touches the cluster, so every path a vote can come by shares it: a chat click on
any replica, `gpubot approve` on a laptop, and the executor itself judging the stored votes
again before it acts. Acting on an approval is the executor's job and nobody else's.

A denial is stored as the request's execution with outcome `denied`, finished in the same
statement that creates it: the same uniqueness constraint that makes an approval act at most
once then makes a later approval impossible, and a denial racing an approval is decided by
whichever claims the row first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bot.approval.policy import decide, deny_refusal
from bot.clock import Clock
from bot.config import Settings
from bot.errors import NotFound
from bot.incidents.lifecycle import withdrawal, withdrawal_text
from bot.incidents.timeline import Timeline, command_for
from bot.model import ActionRequest, IncidentState, Lang, Outcome, Vote
from bot.names import GPUBOT
from bot.ports import Execution, Store
from bot.texts import say

GroupsOf = Callable[[str], set[str]]


# Stored in English, as denials before it were: `denial_reason` says it in the reader's.
_NO_REASON = say(Lang.EN, "decide.no_reason")


def denial_reason(detail: str, lang: Lang) -> str:
    """A denial's stored reason as a person reads it in `lang`: the default in `lang`, a
    reason someone gave as they gave it."""
    return say(lang, "decide.no_reason") if detail == _NO_REASON else detail


class Voting:
    """Owns nothing but the path of a vote: judged by the policy, stored once, told in the
    timeline. Never: acts on an approval (the executor does), or counts a vote the store did
    not keep (a double click meets the store's uniqueness constraint)."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        timeline: Timeline,
        *,
        groups_of: GroupsOf = lambda _user: set(),
        clock: Clock,
    ) -> None:
        self.store = store
        self.settings = settings
        self.timeline = timeline
        self.groups_of = groups_of
        self.clock = clock

    def record_approval(self, request_id: str, approver: str) -> Outcome:
        """Records one person's approval when the policy allows it now. `approved` means the
        approvals are now enough to act on; `need-another` that a second person must agree."""
        try:
            request = self.store.request(request_id)
        except NotFound:
            return Outcome(
                request_id, "not-allowed", say(self.settings.lang, "decide.no_such_request")
            )
        decided = self.store.execution(request_id)
        stale = self._no_longer_valid(request, decided)
        if stale is not None:
            return stale
        if decided is not None and decided.outcome == "denied":
            denied = say(
                self.settings.lang,
                "decide.denied_before",
                who=decided.executor,
                detail=denial_reason(decided.detail, self.settings.lang),
            )
            return Outcome(request_id, "not-allowed", denied)
        now = self.clock()
        earlier: Sequence[Vote] = self.store.votes(request_id)
        decision = decide(
            request,
            approver,
            now,
            self.settings.remediation.approvals,
            self.groups_of,
            earlier,
            self.settings.lang,
        )
        if not decision.counted:
            self.timeline.vote_refused(request, approver, decision.reason)
            if decision.outcome == "expired":
                self.timeline.move(
                    request.incident,
                    IncidentState.EXPIRED,
                    GPUBOT,
                    say(self.settings.lang, "exec.state.expired"),
                )
            return Outcome(request_id, decision.outcome, decision.reason)
        if not self.store.add_vote(Vote(request_id=request_id, approver=approver, at=now)):
            return Outcome(
                request_id,
                "duplicate",
                say(self.settings.lang, "decide.voted_before", who=approver),
            )
        self.timeline.approval(request, approver, decision.outcome)
        if decision.outcome == "need-another":
            return Outcome(
                request_id, "need-another", decision.reason, approvals_needed=decision.needed
            )
        approved = say(
            self.settings.lang,
            "decide.approved_state",
            action=request.action.value + (" --force" if request.force else ""),
            node=request.node,
            who=", ".join(decision.approvers),
        )
        self.timeline.move(request.incident, IncidentState.APPROVED, approver, approved)
        return Outcome(request_id, "approved", decision.reason, request=request)

    def record_denial(self, request_id: str, who: str, reason: str = "") -> Outcome:
        try:
            request = self.store.request(request_id)
        except NotFound:
            return Outcome(
                request_id, "not-allowed", say(self.settings.lang, "decide.no_such_request")
            )
        stale = self.no_longer_valid(request)
        if stale is not None:
            return stale
        policy = self.settings.remediation.approvals
        refused = deny_refusal(request, who, policy, self.groups_of, self.settings.lang)
        if refused is not None:
            self.timeline.denial_refused(request, who, refused)
            return Outcome(request_id, "not-allowed", refused)
        now = self.clock()
        # One statement, born finished: never a half-written row a restart could "resume".
        if not self.store.record_denial(request_id, who, reason or _NO_REASON, now):
            done = self.store.execution(request_id)
            if done is not None and done.outcome == "denied":
                already = say(self.settings.lang, "decide.already_denied", who=done.executor)
                return Outcome(request_id, "duplicate", already)
            decided = say(self.settings.lang, "decide.already_decided")
            return Outcome(request_id, "duplicate", decided)
        self.timeline.denial(request, who, reason)
        denied_by = say(self.settings.lang, "decide.denied_by", who=who)
        self.timeline.move(request.incident, IncidentState.DENIED, who, denied_by)
        command = command_for(request)
        said = say(self.settings.lang, "decide.denied_outcome", command=command, who=who)
        return Outcome(request_id, "denied", said)

    def no_longer_valid(self, request: ActionRequest) -> Outcome | None:
        """A request acts only while its incident is the open problem: withdrawn (its
        incident resolved or superseded) is the answer to every vote, and nothing changes."""
        return self._no_longer_valid(request, self.store.execution(request.id))

    def _no_longer_valid(self, request: ActionRequest, decided: Execution | None) -> Outcome | None:
        """`no_longer_valid`, given the request's execution row as just read."""
        if decided is not None and decided.outcome == "withdrawn":
            why = decided.detail
        elif request.incident is not None and decided is None:
            incident = self.store.incident(request.incident)
            if incident.state is not IncidentState.RESOLVED:
                return None
            # Resolved by an older gpubot, which did not withdraw: the record catches up.
            why = withdrawal(incident.id, incident.resolved_at or incident.updated_at)
            self.store.record_withdrawal(request.id, why, self.clock())
        else:
            return None
        lang = self.settings.lang
        invalid = say(lang, "decide.no_longer_valid", why=withdrawal_text(why, lang))
        return Outcome(request.id, "withdrawn", invalid)

    def approvers_enough(self, request: ActionRequest) -> list[str] | None:
        """The approvers, when the stored votes (each judged as of its own time) suffice."""
        policy = self.settings.remediation.approvals
        counted: list[Vote] = []
        for vote in self.store.votes(request.id):
            decision = decide(request, vote.approver, vote.at, policy, self.groups_of, counted)
            if not decision.counted:
                continue
            counted.append(vote)
            if decision.outcome == "approved":
                return decision.approvers
        return None
