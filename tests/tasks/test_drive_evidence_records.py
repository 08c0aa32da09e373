"""What the drive recorder logs of the evidence (issue 26, part V) and of a fit of a named
structure (`greylab drive fit`), with the in-memory tracker."""

from __future__ import annotations

import math
from typing import Any

import pytest

from models.drivetrain import reference_recording
from models.drivetrain.structure_fit import StructureFit
from tasks.drive.records import DriveRecorder
from tasks.drive.result import DriveResult, joint_text
from tracking.memory import InMemoryTracker


@pytest.fixture(scope="module")
def fitted() -> dict[str, Any]:
    recording = reference_recording("1,5,6", duration=0.6, noise=0.3, seed=4)
    return {"fit": StructureFit("1,6").fit(recording), "recording": recording}


def test_the_evidence_is_logged_with_its_figure(fitted: dict[str, Any]) -> None:
    fit, recording = fitted["fit"], fitted["recording"]
    tracker = InMemoryTracker()
    recorder = DriveRecorder("evidence", tracker)
    with recorder.session({"structure": ["one_mass", "viscous"]}) as run_id:
        recorder.generation(0, fit.best_evaluation_)
        recorder.result(fit, recording)
        recorder.evidence(fit.evidence_, recording)
    run = tracker.runs[run_id]
    assert "figures/convergence.png" not in run.artifacts  # a fit has no generations
    assert run.artifacts["figures/residuals.png"][:4] == b"\x89PNG"
    assert run.artifacts["evidence.json"]["parameters"]["J1"]["stderr"] > 0
    rivals = run.artifacts["rivals.csv"]
    assert set(rivals["codes"]) >= {"1,6", "1,5,6", "1"} and rivals["relation"].iloc[0] == "best"
    # data from {1,5,6}: the fit of {1,6} is not the preferred one, its residuals fail
    assert run.params["evidence.preferred"] == "1,5,6"
    last = {k: v[-1][1] for k, v in run.metrics.items()}  # metric -> [(step, value)]
    assert last["evidence.rivals_agree"] == 0.0 and last["evidence.residuals_passed"] == 0.0
    assert last["stderr.J1"] == pytest.approx(fit.evidence_.parameters[0].stderr)
    assert last["best_rss"] == pytest.approx(fit.best_rss_)  # what `compare` reads


def test_the_result_shows_the_evidence(fitted: dict[str, Any]) -> None:
    fit = fitted["fit"]
    result = DriveResult(
        best_structure=fit.best_structure_, best_codes=fit.best_codes_,
        parameters=fit.best_parameters_, rss=fit.best_rss_, fitness=fit.best_fitness_,
        generations=0, run_id="r1", data_hash="h" * 64, source="test", resumed_from=None,
        preset="data", tracking="", evidence=fit.evidence_.to_dict(), fit=True,
    )  # fmt: skip
    out = result.to_dict()
    assert out["fit"] is True and out["evidence"]["rivals"]["preferred"] == [1, 5, 6]
    assert result.headline().startswith("fit {1,6}")
    text = result.markdown()
    assert "# Drive structure fit" in text and "## Evidence" in text
    assert "Residual tests (99 %" in text and "FAIL" in text and "preferred {1,5,6}" in text
    stderr = out["evidence"]["parameters"]["J1"]["stderr"]
    assert math.isfinite(stderr) and f"{stderr:.4g}" in text
    # the simultaneous interval next to the marginal one, and a result from before it ("-")
    j1 = out["evidence"]["parameters"]["J1"]
    assert (
        "simultaneous 95 %" in text
        and f"{j1['joint_lower']:.4g} .. {j1['joint_upper']:.4g}" in text
    )
    assert j1["joint_lower"] < j1["lower"] < j1["upper"] < j1["joint_upper"]
    old = {k: v for k, v in j1.items() if not k.startswith("joint")}
    assert joint_text(old) == "-" and joint_text(j1 | {"joint_upper": None}) == "-"


def test_a_widened_search_is_logged_with_both_answers_and_the_springs_box() -> None:
    periodic = {"frequency_hz": 52.6, "share": 0.02, "p_value": 6e-11, "bins": 1500,
                "confidence": 0.99, "passed": False}  # fmt: skip
    record = {"from_prefilter_hz": 25.0, "to_prefilter_hz": 110.0, "periodic": periodic,
              "first_codes": [1, 8, 10], "second_codes": [2, 8, 9, 10], "kept": True,
              "from_stiffness_max": 5.466, "to_stiffness_max": 1432.0}  # fmt: skip
    tracker = InMemoryTracker()
    recorder = DriveRecorder("widened", tracker)
    with recorder.session({"structure": []}) as run_id:
        recorder.widened(record)
        recorder.widened(None)  # a search that ran once logs nothing
    run = tracker.runs[run_id]
    assert run.params["widened.to_prefilter_hz"] == "110" and run.params["widened.kept"] == "True"
    assert run.params["widened.first_codes"] == "1,8,10"
    last = {k: v[-1][1] for k, v in run.metrics.items()}
    assert last["widened.peak_hz"] == 52.6 and last["widened.to_stiffness_max"] == 1432.0
    assert last["widened.from_stiffness_max"] == 5.466
    assert run.artifacts["widened.json"] == record
    old = {k: v for k, v in record.items() if "stiffness" not in k}  # before 2026-12-07
    with recorder.session({"structure": []}) as run_id:
        recorder.widened(old)
    assert "widened.to_stiffness_max" not in tracker.runs[run_id].metrics
