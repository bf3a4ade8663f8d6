"""What a message states and when it is revised (`bot.pipeline.told`): a blocker gone or new is
a change, a blocker's detail moving (a terminating pod's age) is not; one revision per pace."""

from __future__ import annotations

from datetime import timedelta

from bot.model import Blocker, Diagnosis, Lang
from bot.pipeline.told import Told
from tests.helpers.builders import T0, diagnosis


def stating(*blockers: Blocker) -> Diagnosis:
    return diagnosis().model_copy(update={"blockers": list(blockers)})


PDB = Blocker(
    kind="pdb", pod="train-0", namespace="ml", detail="PDB train-pdb (disruptionsAllowed=0)"
)
STUCK = Blocker(kind="terminating", pod="old-0", namespace="ml", detail="Terminating for 40s")


def test_only_a_blocker_gone_or_new_revises_and_once_per_pace() -> None:
    told = Told(30)
    told.said("7", stating(PDB, STUCK), T0)
    older = STUCK.model_copy(update={"detail": "Terminating for 95s"})
    later = T0 + timedelta(minutes=5)
    assert told.revision("7", stating(PDB, older), later, Lang.EN) is None
    assert told.due(later) == set()

    # The budget freed 10 s after the post: held back, and owed to the follow-up at T0 + 30 s.
    soon = T0 + timedelta(seconds=10)
    assert told.revision("7", stating(older), soon, Lang.EN) is None
    assert told.due(soon) == set()
    assert told.due(T0 + timedelta(seconds=30)) == {"gpu-a1"}
    revision = told.revision("7", stating(older), T0 + timedelta(seconds=30), Lang.EN)
    assert revision is not None
    assert revision.note == (
        "updated: no longer in the drain's way: "
        "pdb ml/train-0 (PDB train-pdb (disruptionsAllowed=0))"
    )
    zh = told.revision("7", stating(older), T0 + timedelta(seconds=30), Lang.ZH)
    assert zh is not None and zh.note.startswith("已更新：不再阻塞排空：pdb ml/train-0")


def test_an_incident_not_told_here_is_not_revised() -> None:
    assert Told(30).revision("9", stating(PDB), T0, Lang.EN) is None
