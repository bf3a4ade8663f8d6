"""Facts built alike share their set of given field names (memory, `bot.model._Frozen`):
a copy with changes must still be a model of its own."""

from bot.model import Blocker, NodeFacts


def test_a_copy_with_changes_leaves_every_model_built_alike_as_it_was() -> None:
    first = NodeFacts(name="gpu-a1", pool="a", unschedulable=False)
    second = NodeFacts(name="gpu-a2", pool="a", unschedulable=False)

    changed = first.model_copy(update={"gate_failures": ["driver"], "ready": "True"})

    assert changed.model_dump(exclude_unset=True) == {
        "name": "gpu-a1",
        "pool": "a",
        "unschedulable": False,
        "gate_failures": ["driver"],
        "ready": "True",
    }
    for untouched in (first, second):
        assert untouched.model_fields_set == {"name", "pool", "unschedulable"}
    assert second.model_dump(exclude_unset=True) == {
        "name": "gpu-a2",
        "pool": "a",
        "unschedulable": False,
    }
    assert NodeFacts(name="gpu-a3").model_fields_set == {"name"}


def test_models_read_back_from_json_keep_what_they_were_given() -> None:
    blocker = Blocker(kind="pdb", pod="p", namespace="ns", detail="0 allowed")
    again = Blocker.model_validate_json(blocker.model_dump_json(exclude_unset=True))
    other = Blocker(kind="pdb", pod="q", namespace="ns", detail="0 allowed")

    assert again == blocker
    assert again.model_fields_set == {"kind", "pod", "namespace", "detail"}
    moved = other.model_copy(update={"detail": "1 allowed", "bypass_flag": "--force"})
    assert moved.model_fields_set == {"kind", "pod", "namespace", "detail", "bypass_flag"}
    assert (blocker.model_fields_set, other.model_fields_set) == (again.model_fields_set,) * 2
    assert other.detail == "0 allowed"
