"""What the drive recorder records beyond one plain search (tests/tasks/test_recorders.py):
a search resumed from its checkpoint (the drive study's cache) and the registered model."""

from __future__ import annotations

from typing import Any

import pytest

from tests.tasks.test_recorders import _record_drive
from tracking.memory import InMemoryTracker


@pytest.mark.parametrize(("resumed", "cache"), [(1, "partial"), (2, "hit")])
def test_a_resumed_search_says_how_much_came_from_the_checkpoint(drive, resumed, cache) -> None:
    import copy

    search = copy.copy(drive["search"])  # 2 generations, as if resumed after `resumed`
    search.resumed_from_ = resumed
    tracker = InMemoryTracker()
    run = tracker.runs[_record_drive(drive | {"search": search}, tracker)]
    assert run.tags["greylab.cache"] == cache
    assert run.tags["greylab.cached_steps"] == f"generations 1-{resumed}"


def test_drive_model_is_registered_under_its_campaign(drive: dict[str, Any]) -> None:
    from models.drivetrain.product import DriveModel
    from tasks.drive.records import DriveRecorder

    tracker = InMemoryTracker()
    recorder = DriveRecorder("recorders", tracker)
    with recorder.session({"population": 4}) as run_id:
        recorder.lineage(drive["path"], "reference:test")
        uri = recorder.register_model(
            drive["search"], drive["recording"], "lab 7/<b>", units="rotary", source="test"
        )
    assert uri == "models:/drive-lab.7.b/1"  # the label reduced to a safe registry name
    (version,) = tracker.models["drive-lab.7.b"]
    structure = ",".join(drive["search"].best_structure_)
    assert version["run_id"] == run_id and version["tags"]["greylab.structure"] == structure
    assert version["tags"]["greylab.data_hash"] == tracker.runs[run_id].tags["greylab.data_hash"]
    spec = tracker.runs[run_id].artifacts["model/artifacts/spec.json"]["model"]
    assert DriveModel.from_dict(spec) == DriveModel.from_search(drive["search"], units="rotary",
                                                                source="test")  # fmt: skip
    assert len(tracker.runs[run_id].artifacts["model/input_example.json"]["data"]) == 200
