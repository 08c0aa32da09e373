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


def test_the_drive_records_end_at_the_answer_after_the_local_search() -> None:
    """A search whose only generation misses the structure and whose local search finds it
    (seed 0, population 2: checked to move twice): the metric steps, the convergence table
    behind the figure and the run's name all end at the answer, which is the truth the
    recording was simulated from (oracle: recovery of a known structure, noise-free)."""
    from models.drivetrain.excitation import reference_recording
    from models.drivetrain.gp.search import StructureSearch
    from models.drivetrain.gp.settings import IdentificationSettings
    from tasks.drive.records import DriveRecorder
    from tasks.drive.result import DriveResult

    truth = ["one_mass", "viscous", "coulomb"]
    recording = reference_recording(truth, duration=0.6)
    tracker = InMemoryTracker()
    recorder = DriveRecorder("recorders", tracker)
    with recorder.session({"population": 2, "generations": 1}) as run_id:
        search = StructureSearch(
            population=2, generations=1, seed=0,
            allowed=("one_mass", "two_mass", "coulomb", "viscous", "gravity"),
            identification=IdentificationSettings(n_starts=1, max_nfev=15, jit=False),
            progress=lambda g, n, best: recorder.generation(g, best),
        ).fit(recording)  # fmt: skip
        recorder.result(search, recording)
    moves = search.polish_[search.polish_["chosen"]]
    assert len(moves) == 2, "the fixture's point: the local search moves after generation 0"
    assert sorted(search.best_structure_) == sorted(truth)
    assert search.history_["overall_best_fitness"].iloc[-1] < search.best_fitness_
    run = tracker.runs[run_id]
    # steps: generation 0 (live), then the two moves; the last is the answer
    fitness = run.metrics["best_fitness"]
    assert [step for step, _ in fitness] == [0, 1, 2]
    assert fitness[1:] == [(1, float(moves["fitness"].iloc[0])), (2, search.best_fitness_)]
    assert run.metrics["best_rss"][-1] == (2, search.best_rss_)
    steps = run.artifacts["convergence.csv"]
    assert steps["generation"].tolist() == [0, 1, 2]
    assert steps["step"].tolist() == ["generation", "local search", "local search"]
    assert steps["overall_best_fitness"].iloc[-1] == search.best_fitness_
    assert sorted(steps["overall_best_names"].iloc[-1].split(",")) == sorted(truth)
    assert run.artifacts["figures/convergence.png"][:4] == b"\x89PNG"
    # the name the flow gives the run says the same fitness as the last metric step
    result = DriveResult(best_structure=search.best_structure_, best_codes=search.best_codes_,
                         parameters=search.best_parameters_, rss=search.best_rss_,
                         fitness=search.best_fitness_, generations=1, run_id=run_id,
                         data_hash="0" * 64, source="reference:test", resumed_from=0,
                         preset="kit", tracking="-")  # fmt: skip
    assert result.headline().endswith(f"fitness {fitness[-1][1]:.3g}")
