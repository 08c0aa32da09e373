"""Flow `drive-structure-search`: load or simulate a recording -> degenerate GP structure
search (individuals evaluated in parallel batches as tasks), or with `structure` the
identification of that structure only (`greylab drive fit`) -> the evidence for the answer
(intervals, residual tests, rival table: `models.drivetrain.structure_fit`) -> tracked result."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pandas as pd
from prefect import flow

from flows.artifacts import finish, flow_run_tags, once_for_bad_input
from flows.drive.inputs import prefilter_cutoff, recording_scales
from flows.drive.settings import Boxes, DrivePreset, DriveSearch
from flows.progress import Progress
from flows.runners import RunnerKind, run_flow
from models.drivetrain.evidence import Evidence
from models.drivetrain.fit_evidence import narrow_boxes_note
from models.drivetrain.gp import RecordingFile, StructureSearch
from models.drivetrain.product import DriveModel
from models.drivetrain.scales import Scales
from models.drivetrain.search_evidence import search_evidence
from models.drivetrain.structure_fit import StructureFit
from runtime.settings import load_settings
from tasks.cache import code_fingerprint
from tasks.drive import tasks as drive_tasks
from tasks.drive.records import DriveRecorder
from tasks.drive.result import DriveResult, friction_gain_record

#: the Prefect form's defaults (a complete form, not an optional one collapsed to None)
DEFAULT_STUDY = DriveSearch()


@flow(name="drive-structure-search", log_prints=True, persist_result=True, result_serializer="json")
def drive_structure_search(study: DriveSearch = DEFAULT_STUDY) -> DriveResult:
    recorder = DriveRecorder(study.experiment)
    settings = study.model_dump(mode="json")
    # preset and batch size are decided by the run (empty/0 = automatic): logged as used;
    # a fit (`structure`) runs no generations: population and generations logged as 0
    defer = {"preset", "batch_size"} | ({"population", "generations"} if study.structure else set())
    with recorder.session(settings, tags=flow_run_tags(), defer=defer) as run_id:
        result = _run(study, recorder)
    outcome = DriveResult(**result, run_id=run_id, tracking=recorder.tracker.ui_hint(),
                          experiment_id=recorder.experiment_id())  # fmt: skip
    return finish(outcome, "drive-result", "best structure and parameters", recorder)


def checkpoint_dir(data_hash: str, study: DriveSearch) -> Path:
    """The checkpoint folder of a search: the drive study's cross-run cache, keyed on the
    recording's content hash, the settings and the greylab code (`tasks.cache`), so a
    checkpoint never outlives the code or data that made it."""
    settings_key = study.model_dump(
        mode="json",
        exclude={
            "experiment",
            "resume",
            "register_model",
            "campaign",
            "validation_data",
            "rivals",
        },
    )
    key = json.dumps([data_hash, settings_key, code_fingerprint()])
    return load_settings().home / "checkpoints" / hashlib.sha256(key.encode()).hexdigest()[:16]


def _run(study: DriveSearch, recorder: DriveRecorder) -> dict[str, Any]:
    reference = {
        "structure": study.reference_structure,
        "noise_percent": study.noise_percent,
        "seed": study.reference_seed,
    }
    loaded = once_for_bad_input(drive_tasks.load_recording)(
        study.data, reference, study.emps_decimate
    )
    recorder.lineage(loaded["path"], loaded["source"], digest=loaded["hash"])

    recording = pd.read_parquet(loaded["path"])
    preset = study.resolved_preset()
    scales = _scales(recording, recorder) if preset is DrivePreset.data else None
    prefilter_hz = prefilter_cutoff(
        study.prefilter, recording, scales=scales, source=loaded["source"]
    )
    if prefilter_hz is not None:
        print(f"prefilter cut-off {prefilter_hz:g} Hz (--prefilter {study.prefilter})")
    settings = study.search_settings(  # with `paper`: the paper's search
        preset, scales=scales, position="position_rad" in recording, prefilter_hz=prefilter_hz
    )
    batch_size = study.batch_size or max(1, -(-study.population // study.workers))
    recorder.run.params({"preset": preset.value, "batch_size": batch_size}
                        | ({"population": 0, "generations": 0} if study.structure else {}))  # fmt: skip
    search, evidence = _identify(study, settings, loaded, recorder, batch_size)
    kept = (getattr(search, "widened_", None) or {}).get("kept")  # (then boxes of its own)
    if preset is DrivePreset.data and study.boxes is Boxes.narrow and not kept:
        evidence = narrow_boxes_note(evidence, typed=study.nominals)
    print(evidence.summary())
    gain = friction_gain_record(search, settings.f_tanh)
    recorder.result(search, recording)
    recorder.friction_gain(gain)
    recorder.widened(getattr(search, "widened_", None))
    recorder.evidence(evidence, recording)
    campaign = study.campaign or loaded["hash"][:12]
    units = "prismatic" if loaded["source"].startswith("emps:") else "rotary"
    model_uri = (
        recorder.register_model(search, recording, campaign, units=units, source=loaded["source"])
        if study.register_model
        else ""
    )
    model = DriveModel.from_search(search, units=units, source=loaded["source"])
    validation = _validate(study, model, model_uri, recorder) or {}
    return {
        **validation,
        "model_uri": model_uri,
        "data_hash": loaded["hash"],
        "source": loaded["source"],
        "best_structure": search.best_structure_,
        "best_codes": search.best_codes_,
        "parameters": search.best_parameters_,
        "rss": search.best_rss_,
        "fitness": search.best_fitness_,
        "generations": 0 if study.structure else study.generations,
        "resumed_from": search.resumed_from_,
        "preset": preset.value,
        "scales": scales.to_dict() if scales else None,
        "paper": study.paper,
        "settings": search.settings.to_dict(),
        "history": tuple(search.history_.to_dict("records")),
        "polish_moves": search.polish_.loc[search.polish_["chosen"], "codes"].tolist(),
        "evidence": evidence.to_dict(),
        "fit": bool(study.structure),
        "selection": getattr(search, "selection_", None),
        "friction_gain": gain,
        "widened": getattr(search, "widened_", None),
        "timed_out": list(search.timed_out_),
    }


def _identify(
    study: DriveSearch, settings: Any, loaded: dict[str, Any], recorder: DriveRecorder,
    batch_size: int,
) -> tuple[Any, Evidence]:  # fmt: skip
    """The search (or with `study.structure` the fit of that structure) on the stored
    recording, its progress logged, and the evidence for its answer."""
    stored = RecordingFile(loaded["path"], loaded["hash"])
    if study.structure:  # greylab drive fit: the named structure only
        fit = StructureFit(study.structure, settings=settings, seed=study.seed,
                           map_batches=drive_tasks.prefect_map_batches, progress=print,
                           rivals=study.rivals, friction_gain=study.fit_gain())  # fmt: skip
        evidence = fit.fit(stored).evidence_
        recorder.search_settings(fit.settings)  # after the fit: a profiled gain is in them
        recorder.generation(0, fit.best_evaluation_)
        return fit, evidence
    progress = Progress("generations", study.generations, key="drive-generations")

    def on_generation(g: int, n: int, best: Any) -> None:
        widened = search.widened_  # set while the search runs again at a wider prefilter
        if widened is not None and progress.total == n:
            progress.total += n
            print(f"the answer's residual shows a periodic component above the prefilter: "
                  f"searching again with it at {widened['to_prefilter_hz']:g} Hz")  # fmt: skip
        recorder.generation(g + n * (widened is not None), best)
        progress.advance()

    checkpoint = checkpoint_dir(loaded["hash"], study)
    search = StructureSearch(
        settings=settings, population=settings.population, generations=settings.generations,
        seed=study.seed, test_fraction=settings.test_fraction,
        submit_batch=drive_tasks.prefect_submit_batch, batch_size=batch_size,
        checkpoint_dir=checkpoint if study.resume else None, progress=on_generation,
        friction_gain=str(study.friction_gain),
    )  # fmt: skip
    recorder.search_settings(search.settings)  # gp.*: every setting the search runs with
    search.fit(stored)
    if study.rivals:
        print("the evidence: identifying the best structure's one-step neighbours")
    evidence = search_evidence(search, stored, drive_tasks.prefect_map_batches,
                               n_batches=study.workers, rivals=study.rivals)  # fmt: skip
    return search, evidence


def _scales(recording: pd.DataFrame, recorder: DriveRecorder) -> Scales:
    """The recording's own scales, printed and logged as `scales.*` params before the search
    centres its nominals and bounds on them."""
    scales = recording_scales(recording)
    print(scales.summary())
    recorder.scales(scales)
    return scales


def _validate(
    study: DriveSearch, model: DriveModel, model_uri: str, recorder: DriveRecorder
) -> dict[str, Any] | None:
    """The identified model simulated on `study.validation_data`, as an evaluation run of
    the study's experiment linked to this run (and its registered version)."""
    if not study.validation_data:
        return None
    from products.validation import ValidationRecorder, validate_drive_model

    outcome = validate_drive_model(
        model, Path(study.validation_data), model_uri=model_uri or f"runs:/{recorder.run_id}",
        model_run_id=recorder.run_id, emps_decimate=study.emps_decimate,
    )  # fmt: skip
    recorded = ValidationRecorder("drive", study.experiment, recorder.tracker).record(outcome)
    return {"validation": recorded.metrics, "validation_run_id": recorded.run_id}


def run_drive_search(study: DriveSearch, *, runner: RunnerKind | str = "thread") -> DriveResult:
    """Run the flow with a chosen task runner (threads, or a Dask cluster)."""
    return run_flow(drive_structure_search, study, runner=runner, workers=study.workers)
