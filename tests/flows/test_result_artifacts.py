"""A flow run's answer on its Prefect run page: the typed result as a Markdown artifact."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tasks.drive.result import DriveResult
from tasks.press.result import ModelVerdict, PressResult
from tracking.markdown import Link, cell

HOSTILE = "M|1 <img src=x onerror=alert(1)> [link](http://evil) **bold**\n# heading"


def _flow_run_id(parent_run_id: str) -> str:
    """The Prefect flow run of a study, from its MLflow parent run's tag: the artifacts read
    below are this run's, not another test's on the test process's shared Prefect server."""
    from mlflow import MlflowClient

    from runtime.settings import load_settings

    run = MlflowClient(load_settings().tracking_uri).get_run(parent_run_id)
    return str(run.data.tags["prefect.flow_run_id"])


def _artifact(key: str, flow_run_id: str) -> Any:
    """The one artifact `key` of the flow run `flow_run_id`."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
    )

    async def read() -> Any:
        async with get_client() as client:
            return await client.read_artifacts(artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=[key]),
                flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])))  # fmt: skip

    (found,) = asyncio.run(read())
    return found


def _press(model: str = "M3") -> PressResult:
    verdict = ModelVerdict(model, "passes", False, 0, 1, False, 0.31, 0.001,
                           {"k5": 120.0}, {"k5": 0.5}, "run-1")  # fmt: skip
    return PressResult("a" * 64, ["D_vertical"], {}, {}, (verdict,), ("low power",), {},
                       "parent-1", "mlflow ui")  # fmt: skip


def test_markdown_escapes_names_from_files_and_users() -> None:
    text = _press(HOSTILE).markdown()
    row = next(line for line in text.splitlines() if "passes" in line)
    assert row.count(" | ") == 8  # 9 cells: the pipe in the name did not add a column
    assert not re.search(r"(?<!\\)[<>\[\]*|]", row.split(" | passes")[0][2:].replace(r"\|", ""))
    assert "\n# heading" not in text  # the line break is gone: no heading from a name
    assert cell(HOSTILE).startswith(r"M\|1 &lt;img src=x onerror=alert\(1\)&gt;")


def test_json_of_the_results_keeps_its_keys() -> None:
    press = _press().to_dict()
    assert set(press) == {"data_hash", "sensors", "design", "normality", "verdicts", "warnings",
                          "cache", "parent_run_id", "tracking", "experiment_id",
                          "paper", "statistic", "correction"}  # fmt: skip
    assert set(press["verdicts"][0]) == {"model", "verdict", "rejected", "n_rejections",
                                         "n_failed", "inconclusive", "min_alpha", "threshold",
                                         "parameters", "standard_errors", "run_id", "model_uri"}  # fmt: skip
    drive = DriveResult(["one_mass"], [1], {"J1": 1.0}, 2.0, 0.5, 3, "r", "h", "s", None,
                        "reference", "ui", ({"generation": 0},))  # fmt: skip
    assert set(drive.to_dict()) == {"best_structure", "best_codes", "parameters", "rss",
                                    "fitness", "generations", "run_id", "data_hash", "source",
                                    "resumed_from", "preset", "model_uri", "validation",
                                    "validation_run_id", "experiment_id", "paper",
                                    "settings", "scales", "polish_moves", "evidence",
                                    "fit", "selection", "friction_gain", "widened",
                                    "timed_out"}  # fmt: skip


def test_press_flow_run_publishes_its_verdict_table(private_prefect: None) -> None:
    from flows.press.flow import PressStudy, run_press_study

    result = run_press_study(PressStudy(models=["M3"], n_tests=4, batch_size=4, cache=False))
    artifact = _artifact("press-result", _flow_run_id(result.parent_run_id))
    assert artifact.type == "markdown"
    assert artifact.data == result.markdown()
    assert "| M3 | passes |" in artifact.data and result.parent_run_id in artifact.data


def test_inverse_and_ingest_results_render_their_rows_escaped() -> None:
    from tasks.ingest.result import IngestResult
    from tasks.inverse.result import InverseStudyResult

    runs = ({"system": HOSTILE, "method": "euler", "dt": 0.001, "status": "failed",
             "error": "infeasible <b>", "run_id": "r1"},
            {"system": "two_mass", "method": "bdf2", "dt": 0.01, "status": "ok", "run_id": "r2"})  # fmt: skip
    inverse = InverseStudyResult(runs, 1, "parent", "ui")
    text = inverse.markdown()
    assert text.startswith("# Inverse simulation: 1 ok, 1 failed")
    assert "<img" not in text and "<b>" not in text and "&lt;b&gt;" in text
    assert inverse.to_dict()["runs"][1]["system"] == "two_mass"
    report = {"counts": {"ingested": 1, "quarantined": 1}, "rows": 40,
              "outcomes": [{"name": "ok.csv", "status": "ingested"},
                           {"name": "[x](y).csv", "status": "quarantined", "message": "bad"}]}  # fmt: skip
    ingest = IngestResult(report, "run-9", {"run_id": "run-9"}, ())
    text = ingest.markdown()
    assert r"\[x\]\(y\).csv | quarantined | bad" in text and "ok.csv" not in text
    assert ingest.to_dict() == {**report, "run_id": "run-9", "tracking": {"run_id": "run-9"},
                                "studies": []}  # fmt: skip
    assert "Studies" not in text
    refused = {"study": "press", "campaign": "line-1", "status": "refused",
               "settings": "/d/campaigns.toml", "reason": "key 'models': <b>no</b>"}  # fmt: skip
    text = IngestResult(report, "run-9", {}, (refused,)).markdown()
    assert "## Studies" in text and "<b>" not in text
    assert "press | line-1 | refused | /d/campaigns.toml | key 'models': &lt;b&gt;no" in text


def test_drive_flow_registers_validates_and_resumes(private_prefect: None, tmp_path: Path) -> None:
    from flows.drive.flow import DriveSearch, run_drive_search
    from models.drivetrain import reference_recording
    from products.validation import validate_model

    recording = tmp_path / "validation.csv"
    reference_recording(noise=0.01, seed=3).to_csv(recording, index=False)
    # rivals off: identifying them (richer neighbours with backlash, fit by continuation)
    # made the two runs cost 107 + 97 CPU s, 15 + 3 without (measured 2026-12-05; the resumed
    # run repeats the evidence); a search's rival table is tested in test_drive_fit.py, on a
    # Dask cluster in tests/integration/test_press_flow.py, and by the demo
    study = DriveSearch(population=4, generations=2, campaign="t1", validation_data=str(recording),
                        rivals=False)  # fmt: skip
    first = run_drive_search(study, runner="thread")
    again = run_drive_search(study, runner="thread")  # the same search: from its checkpoint
    # the same model from the same data: the version registered first, no duplicate
    assert (first.model_uri, again.model_uri) == ("models:/drive-t1/1", "models:/drive-t1/1")
    assert first.resumed_from is None and again.resumed_from == 2
    assert again.best_structure == first.best_structure
    # the flow's validation equals validating the registered model on the same file
    direct = validate_model(first.model_uri, recording, kind="drive")
    assert first.validation == direct.metrics and set(direct.metrics) == {"velocity", "position"}
    assert first.validation_run_id and "Open-loop validation" in first.markdown()
    assert first.to_dict()["validation"] == first.validation
    # what MLflow records is what the run used: the settings as given, and for the two the
    # run decides (empty preset, batch size 0), the values it took
    from runtime.settings import load_settings
    from tracking.mlflow_tracker import Tracker

    params = Tracker(load_settings()).client.get_run(first.run_id).data.params
    given = {k: v if isinstance(v, str) else json.dumps(v)
             for k, v in study.model_dump(mode="json").items() if v is not None}  # fmt: skip
    assert params["preset"] == "reference" and params["batch_size"] == "2"  # 4 / 2 workers
    assert params["boxes"] == "narrow"
    assert {k: params[k] for k in given if k != "batch_size"} == {
        k: v for k, v in given.items() if k != "batch_size"
    }


def test_run_ids_link_to_the_mlflow_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000/")
    text = _press().markdown()
    view = "?workflowType=machine_learning"  # MLflow 3 opens in its GenAI view unless told
    assert f"| [run-1](http://127.0.0.1:5000/#/runs/run-1{view}) |" in text
    assert f"MLflow parent run [parent-1](http://127.0.0.1:5000/#/runs/parent-1{view})" in text
    hostile = cell(Link("x) [a](b", "http://h/#/runs/x) [a](javascript:b"))
    assert hostile == r"[x\) \[a\]\(b](http://h/#/runs/x%29%20%5Ba%5D%28javascript:b)"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///m.db")  # no web UI: plain ids
    assert "| run-1 |" in _press().markdown()


def _rendered_width(line: str) -> int:
    """What a Markdown table row shows: link text instead of `[text](url)`, no escapes."""
    return len(re.sub(r"\\(.)", r"\1", re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", line)))


def test_the_summary_is_the_answer_at_a_glance(monkeypatch: pytest.MonkeyPatch) -> None:
    """Narrow enough for a laptop with real 32-character run ids (links are short labels),
    the warning above the table, the one verdict vocabulary ("rejected", as the headline,
    the MLflow run names and `greylab compare`)."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.lab:5000")
    ids = ["0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"]
    verdicts = tuple(
        ModelVerdict(m, "rejected" if rejected else "passes", rejected, 7 if rejected else 0,
                     0, False, 1e-9 if rejected else 0.31, 0.001, {"k5": 120.0}, {"k5": 0.5},
                     run_id, f"models:/press-{m}/12")
        for m, rejected, run_id in (("M1", True, ids[0]), ("M3", False, ids[1]))
    )  # fmt: skip
    result = PressResult("a" * 64, ["D_vertical", "D_horizontal"], {}, {}, verdicts,
                         ("series split: ran 7 of the 50 asked for",), {}, "c" * 32, "ui",
                         experiment_id="3")  # fmt: skip
    text = result.summary()
    lines = text.splitlines()
    assert lines[0] == "# press: M1 rejected; M3 passes" == "# " + result.headline()
    table = [line for line in lines if line.startswith("|")]
    warning = lines.index("**Warning:** series split: ran 7 of the 50 asked for")
    assert warning < lines.index(table[0])  # seen before the table, not on the last line
    assert "| M1 | rejected |" in text and "| M3 | passes |" in text
    assert "detected" not in text and "detected" not in result.markdown()
    assert max(_rendered_width(line) for line in lines) <= 100, text  # a laptop's width
    assert ids[0] not in re.sub(r"\([^)]*\)", "", text)  # ids only inside the link targets
    assert f"/#/experiments/3/runs/{ids[0]}?workflowType=machine_learning" in text
    assert "press-M1 v12" in text


def test_press_flow_run_is_named_after_its_outcome_and_logs_its_warning(
    private_prefect: None,
) -> None:
    """A real flow run (ephemeral Prefect): a series split with fewer series than tests asked
    for warns; the run's name is the headline, the warning a WARNING log record and a line
    of the summary artifact."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter

    from flows.press.flow import PressStudy, run_press_study

    study = PressStudy(models=["M3"], n_tests=30, split="series", batch_size=30, cache=False)
    result = run_press_study(study)
    (warning,) = [w for w in result.warnings if "asked for" in w]
    summary = _artifact("press-summary", _flow_run_id(result.parent_run_id))

    async def read() -> tuple[Any, Any, Any]:
        async with get_client() as client:
            run = await client.read_flow_run(summary.flow_run_id)
            logs = await client.read_logs(LogFilter(flow_run_id={"any_": [run.id]}))
            return summary, run, logs

    summary, run, logs = asyncio.run(read())
    assert run.name == result.headline() == run.state.message
    assert summary.data == result.summary() and warning in summary.data
    assert any(r.level == 30 and warning in r.message for r in logs)  # logging.WARNING


def test_bad_input_fails_a_task_once_other_failures_are_retried(private_prefect: None) -> None:
    """The study flows load their data through `once_for_bad_input(task)`: an InputError (an
    unknown submodel, a file that is not a table) is not retried, an OSError still is."""
    from prefect import flow, task

    from flows.artifacts import once_for_bad_input
    from methods.errors import InputError

    calls: list[str] = []

    @task(retries=2, retry_delay_seconds=0)
    def load(error: str) -> None:
        calls.append(error)
        raise InputError("element 2 'colomb': not a submodel") if error == "input" else OSError

    @flow
    def study(error: str) -> None:
        once_for_bad_input(load)(error)

    for error, attempts in (("input", 1), ("io", 3)):
        calls.clear()
        with pytest.raises(InputError if error == "input" else OSError):
            study(error)
        assert calls == [error] * attempts


def test_the_evidence_moves_of_a_drive_result_are_printed_and_on_its_page(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from flows.drive.cli import print_drive_result

    move = {"before": "one_mass,viscous", "after": "two_mass,viscous", "p_value": 1e-4,
            "level": 0.005, "m": 2}  # fmt: skip
    chosen = {"n_eff": 150.25, "alpha": 0.01, "m": 2, "moves": [move]}
    drive = DriveResult(["two_mass", "viscous"], [2, 5], {"J1": 1.0}, 2.0, 0.5, 3, "r", "h",
                        "s", None, "data", "ui", selection=chosen)  # fmt: skip
    page = drive.markdown()
    assert "level 0.01, 150.2 effective samples): moved 1 time(s)" in page
    assert cell("{one_mass,viscous} -> {two_mass,viscous}: F-test p 0.0001 < 0.005") in page
    print_drive_result(drive)
    assert "the evidence moved the answer {one_mass,viscous}" in capsys.readouterr().out
    unmoved = DriveResult(["one_mass"], [1], {"J1": 1.0}, 2.0, 0.5, 3, "r", "h", "s", None,
                          "data", "ui", selection={**chosen, "moves": []})  # fmt: skip
    assert "no richer structure fits significantly better" in unmoved.markdown()
    by_fitness = DriveResult(["one_mass"], [1], {"J1": 1.0}, 2.0, 0.5, 3, "r", "h", "s", None,
                             "reference", "ui", selection={**chosen, "alpha": 0.0})  # fmt: skip
    assert "chosen by the evidence" not in by_fitness.markdown()  # no level: no such line


def test_hostile_names_in_the_evidence_moves_do_not_become_markup() -> None:
    move = {"before": HOSTILE, "after": "two_mass", "p_value": 0.001, "level": 0.01, "m": 1}
    drive = DriveResult(["two_mass"], [2], {"J1": 1.0}, 2.0, 0.5, 3, "r", "h", "s", None,
                        "data", "ui", selection={"n_eff": 10.0, "alpha": 0.01, "m": 1,
                                                 "moves": [move]})  # fmt: skip
    line = next(x for x in drive.markdown().splitlines() if "F-test p" in x)
    assert not re.search(r"(?<!\\)[<>\[\]*|]", line.replace(r"\|", "")), line
    assert "\n# heading" not in drive.markdown()


def test_the_answers_friction_gain_in_one_shape_for_a_search_and_a_fit() -> None:
    from types import SimpleNamespace

    from tasks.drive.result import friction_gain_record, gain_text

    searched = {"mode": "auto", "profiled": True, "preset_f_tanh": 100.0, "f_tanh": 41.2,
                "estimated": True, "profile": [[100.0, 2.0], [41.2, 1.0]]}  # fmt: skip
    search = SimpleNamespace(friction_gain_=searched, settings=SimpleNamespace(f_tanh=41.2))
    assert friction_gain_record(search, 100.0) == searched
    profile = SimpleNamespace(to_dict=lambda: {"f_tanh": 20.0, "rss": 1.0,
                                               "profile": [[20.0, 1.0]]})  # fmt: skip
    fit = SimpleNamespace(friction_gain="profile", gain_profile_=profile,
                          settings=SimpleNamespace(f_tanh=20.0))  # fmt: skip
    fitted = friction_gain_record(fit, 50.0)
    assert set(fitted) == set(searched) and fitted["f_tanh"] == 20.0
    assert fitted["preset_f_tanh"] == 50.0 and fitted["estimated"] is True
    fixed = friction_gain_record(SimpleNamespace(settings=SimpleNamespace(f_tanh=50.0)), 50.0)
    assert fixed["estimated"] is False and gain_text(fixed) == "" and gain_text(None) == ""
    text = gain_text(searched)
    assert text == "friction gain f_tanh 41.2 estimated by the fit (the preset's 100)"
    drive = DriveResult(["one_mass", "coulomb"], [1, 5], {"J1": 1.0}, 2.0, 0.5, 3, "r", "h",
                        "s", None, "data", "ui", friction_gain=searched)  # fmt: skip
    assert cell(text) in drive.markdown() and drive.to_dict()["friction_gain"] == searched


def test_a_widened_search_says_why_on_the_run_page_and_in_the_json() -> None:
    from tasks.drive.result import periodic_text, widened_text

    periodic = {"frequency_hz": 52.6, "share": 0.0204, "p_value": 6e-11, "bins": 1500,
                "confidence": 0.99, "passed": False}  # fmt: skip
    record = {"from_prefilter_hz": 25.0, "to_prefilter_hz": 110.0, "periodic": periodic,
              "first_structure": ["one_mass", "gravity", "delay"], "first_codes": [1, 8, 10],
              "first_rss": 0.0206, "first_fitness": 3.0, "first_evaluations": 60}  # fmt: skip
    text = widened_text(record)
    assert text.startswith("searched again with the prefilter at 110 Hz: the answer at 25 Hz, "
                           "{1,8,10} (RSS 0.0206), left a periodic component (peak 52.6 Hz, 2.04 % of the "
                           "residual's power, Fisher's p 6e-11) above that cut-off")  # fmt: skip
    assert "without a prefilter" in widened_text(record | {"to_prefilter_hz": 0.0})
    springs = {"from_stiffness_max": 5.466, "to_stiffness_max": 1432.0}
    assert widened_text(record | springs).startswith(
        "searched again with the prefilter at 110 Hz and springs up to 1.43e+03 (from 5.47): "
        "the answer at 25 Hz"
    )
    second = {"second_codes": [2, 8, 9, 10], "second_periodic": periodic | {"passed": True}}
    kept = widened_text(record | second | {"kept": True})
    assert kept.endswith("; the answer there, {2,8,9,10}, explains it (its residual shows none)")
    first = widened_text(record | second | {"kept": False})
    assert first.endswith("left one too (peak 52.6 Hz, 2.04 % of the residual's power, Fisher's "
                          "p 6e-11), so the first answer stands")  # fmt: skip
    assert widened_text(None) == ""
    drive = DriveResult(["two_mass", "gravity"], [2, 8], {"J1": 1.0}, 2.0, 0.5, 3, "r", "h",
                        "s", None, "data", "ui", widened=record)  # fmt: skip
    assert cell(text) in drive.markdown() and drive.to_dict()["widened"] == record
    assert "searched again" not in DriveResult(["two_mass"], [2], {}, 2.0, 0.5, 3, "r", "h", "s",
                                               None, "data", "ui").markdown()  # fmt: skip
    assert periodic_text({"periodic": periodic}).startswith("; periodic component FAIL (peak 52.6")
    assert periodic_text({}) == "" and periodic_text({"periodic": None}) == ""
