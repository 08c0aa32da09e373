"""The drive run's MLflow page agrees with its answer: a search whose local search, after the
last generation, moves to the true structure (seed 0, population 2, one generation: checked
in tests/tasks/test_drive_records.py) is recorded on a real MLflow server and opened in
Chromium from a fresh profile. Its name says the answer's fitness, its metrics page shows
best_fitness and best_rss at the answer, its description the final stage's choice by the
evidence (crafted markup shown as text), the evidence's marginal and simultaneous
intervals, and a search run again at a wider prefilter (`widened`, with its spring boxes and
Fisher's periodic test, seen after "Show more"), its convergence figure among the artifacts.
A search whose work limit stopped identifications says so on its page (the note, the
`n_timed_out` metric). Screenshots in `build/browser-shots/drive-*.png`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser.servers import chromium, fresh_page, mlflow_ui_server, shot

pytestmark = pytest.mark.browser

#: a choice by the evidence that moved the answer once (`StructureSearch.selection_`), with
#: markup in a structure's name as a hostile recording's result could carry
MOVED = {"n_eff": 149.9, "alpha": 0.01, "m": 2,
         "moves": [{"before": "2,5", "after": "2,5,<u>injected</u>", "p_value": 1.2e-4,
                    "level": 0.005, "m": 2}]}  # fmt: skip
#: a search run again at a wider prefilter whose first answer stood (`gp.widening`), with
#: markup in a structure's code as a hostile result could carry
PEAK = {"frequency_hz": 52.65, "share": 0.0204, "p_value": 5.8e-11, "bins": 1500,
        "confidence": 0.99, "passed": False}  # fmt: skip
WIDENED = {"from_prefilter_hz": 25.0, "to_prefilter_hz": 110.0, "periodic": PEAK,
           "first_structure": ["one_mass"], "first_codes": [1, 8, 10], "first_rss": 0.0206,
           "first_fitness": 3.0, "first_evaluations": 60, "from_stiffness_max": 5.466,
           "to_stiffness_max": 201.5, "kept": False, "second_structure": ["two_mass"],
           "second_codes": [2, "<i>9</i>"], "second_rss": 0.02, "second_periodic": PEAK,
           "second_evaluations": 70}  # fmt: skip


def _recorder(uri: str, tmp_path: Path, monkeypatch):
    """The drive runs' recorder on the MLflow server at ``uri`` (the environment set to it)."""
    from runtime.settings import load_settings
    from tasks.drive.records import DriveRecorder
    from tracking.mlflow_tracker import Tracker

    env = {"GREYLAB_HOME": str(tmp_path / "home"), "MLFLOW_TRACKING_URI": uri}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return DriveRecorder("drive-structure-search", Tracker(load_settings(env)))


def test_the_drive_run_page_ends_at_the_answer(tmp_path: Path, monkeypatch) -> None:
    from models.drivetrain.excitation import reference_recording
    from models.drivetrain.gp.search import StructureSearch
    from models.drivetrain.gp.settings import IdentificationSettings
    from models.drivetrain.search_evidence import search_evidence
    from tasks.drive.result import DriveResult

    with mlflow_ui_server(tmp_path) as uri, chromium() as browser:
        recorder = _recorder(uri, tmp_path, monkeypatch)
        recording = reference_recording(["one_mass", "viscous", "coulomb"], duration=0.6)
        with recorder.session({"population": 2, "generations": 1}) as run_id:
            search = StructureSearch(
                population=2, generations=1, seed=0,
                allowed=("one_mass", "two_mass", "coulomb", "viscous", "gravity"),
                identification=IdentificationSettings(n_starts=1, max_nfev=15, jit=False),
                progress=lambda g, n, best: recorder.generation(g, best),
            ).fit(recording)  # fmt: skip
            recorder.result(search, recording)
        assert search.polish_["chosen"].sum() == 2  # the local search moved after generation 0
        result = DriveResult(best_structure=search.best_structure_, best_codes=search.best_codes_,
                             parameters=search.best_parameters_, rss=search.best_rss_,
                             fitness=search.best_fitness_, generations=1, run_id=run_id,
                             data_hash="0" * 64, source="reference:test", resumed_from=0,
                             preset="reference", tracking=uri,
                             experiment_id=recorder.experiment_id(), selection=MOVED,
                             widened=WIDENED,
                             evidence=search_evidence(search, recording, rivals=False).to_dict())  # fmt: skip
        recorder.outcome(recorder.run, result.headline(), result.markdown())  # as finish() does
        history = recorder.tracker.client.get_metric_history(run_id, "best_fitness")
        assert [m.step for m in history] == [0, 1, 2]
        assert history[-1].value == pytest.approx(search.best_fitness_, rel=1e-12)

        page = fresh_page(browser)
        page.goto(result._link(run_id).url)
        page.get_by_text(result.headline()).first.wait_for()  # the name: the answer's fitness
        page.get_by_text("best_fitness").first.wait_for()
        shot(page, "drive-1-run-page")
        # the run page's metrics table shows each metric's last value: the answer's, not the
        # best of generation 0 (10 % apart here); 4 digits: however MLflow rounds for display
        for key, answer in (("best_fitness", search.best_fitness_), ("best_rss", search.best_rss_)):
            after = page.inner_text("body").split(key, 1)[1]
            shown = float(
                re.search(r"[-+]?\d[\d,]*\.?\d*(?:e[-+]?\d+)?", after).group().replace(",", "")
            )
            assert shown == pytest.approx(answer, rel=1e-4), (key, after[:80])
        assert history[0].value != pytest.approx(search.best_fitness_, rel=1e-4)
        # the final stage's choice by the evidence, as the run's description: its move in
        # words, the crafted markup in the structure's names shown as text, not run
        page.get_by_text("Answer chosen by the evidence").first.wait_for()
        body = page.inner_text("body")
        assert "149.9 effective samples" in body and "moved 1 time(s)" in body
        assert "F-test p 0.00012 < 0.005 (0.01 over 2 richer structures)" in body
        assert "{2,5} -> {2,5,<u>injected</u>}" in body  # no backslash shown (it was, escaped
        assert page.locator("u", has_text="injected").count() == 0  # by backslashes), no markup
        # the evidence's intervals: each parameter's simultaneous interval beside its marginal
        # one (docs/methods.md §2.9), as the result holds it
        assert "simultaneous 95 %" in body
        for name, p in result.evidence["parameters"].items():
            assert f"{p['joint_lower']:.4g} .. {p['joint_upper']:.4g}" in body, name
        # the widened search in words (this noise-free answer's own residual is not tested)
        assert ("searched again with the prefilter at 110 Hz and springs up to 202 (from 5.47): "
                "the answer at 25 Hz, {1,8,10} (RSS 0.0206), left a periodic component (peak "
                "52.65 Hz") in body  # fmt: skip
        assert "the answer there, {2,<i>9</i>}, left one too" in body
        assert page.locator("i", has_text="9").count() == 0  # shown as text, not markup
        page.get_by_text("Show more").first.click()  # the description unfolded, as a user does
        widened = page.get_by_text("searched again with the prefilter at 110 Hz").first
        widened.scroll_into_view_if_needed()
        assert widened.is_visible()
        shot(page, "drive-1b-widened")
        page.get_by_role("tab", name="Artifacts").click()
        page.get_by_text("convergence.csv").first.wait_for()
        shot(page, "drive-2-artifacts")


def test_the_run_page_tells_the_identifications_a_limit_stopped(
    tmp_path: Path, monkeypatch
) -> None:
    """A search whose identifications a work limit stopped (deterministic, unlike the wall
    clock: `IdentificationSettings.work_limit`): its run page, opened from a fresh profile,
    says so in the description (the evidence's note, both limits named) and shows the
    `n_timed_out` metric at the number of stops the result lists."""
    from models.drivetrain.excitation import reference_recording
    from models.drivetrain.gp.search import StructureSearch
    from models.drivetrain.gp.settings import IdentificationSettings
    from models.drivetrain.search_evidence import search_evidence
    from tasks.drive.result import DriveResult

    with mlflow_ui_server(tmp_path) as uri, chromium() as browser:
        recorder = _recorder(uri, tmp_path, monkeypatch)
        recording = reference_recording(["one_mass", "viscous", "coulomb"], duration=0.6)
        ident = IdentificationSettings(n_starts=1, max_nfev=15, jit=False, work_limit=2e4)
        with recorder.session({"population": 2, "generations": 1}) as run_id:
            search = StructureSearch(population=2, generations=1, seed=0,
                                     allowed=("one_mass", "coulomb", "viscous"),
                                     identification=ident).fit(recording)  # fmt: skip
            recorder.result(search, recording)
        stops = len(search.timed_out_)
        assert stops, "a limit of 2e4 state updates stopped no identification"
        result = DriveResult(best_structure=search.best_structure_, best_codes=search.best_codes_,
                             parameters=search.best_parameters_, rss=search.best_rss_,
                             fitness=search.best_fitness_, generations=1, run_id=run_id,
                             data_hash="0" * 64, source="reference:test", resumed_from=0,
                             preset="reference", tracking=uri, timed_out=search.timed_out_,
                             experiment_id=recorder.experiment_id(),
                             evidence=search_evidence(search, recording, rivals=False).to_dict())  # fmt: skip
        recorder.outcome(recorder.run, result.headline(), result.markdown())  # as finish() does

        page = fresh_page(browser)
        page.goto(result._link(run_id).url)
        page.get_by_text("n_timed_out").first.wait_for()
        more = page.get_by_text("Show more")
        if more.count():  # a long description is folded: unfolded, as a user does
            more.first.click()
        note = page.get_by_text(f"{stops} identification").first
        note.scroll_into_view_if_needed()
        assert note.is_visible()
        shot(page, "drive-3-stopped")
        body = page.inner_text("body")
        assert "stopped at the work or time limit (2e+04 state updates or 120 s" in body
        assert "the work limit falls at the same point on any machine" in body
        shown = re.search(r"n_timed_out\s+([\d.]+)", body)
        assert shown and float(shown.group(1)) == stops, body.split("n_timed_out", 1)[1][:40]
