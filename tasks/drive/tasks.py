"""Prefect tasks of the drive-train structure search (thin over `models.drivetrain.gp`).

The GP loop itself runs in the core (`StructureSearch.fit`); the flow hands it a `submit_batch`
that submits one Prefect task per batch of individuals, so a generation's identifications run
in parallel on the flow's task runner (threads, or Dask worker processes), and the individuals
bred ahead (`GPSettings.breed_ahead`) keep a worker busy while the search breeds. Evaluating an
individual is deterministic and has its own iteration and time limits; it is not retried.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NONE

from models.drivetrain import reference_recording
from runtime.settings import load_settings
from schemas.drive import load_drive_recording, load_emps, validate_drive_recording
from schemas.storage import content_hash, store_table


def reference_noise(structure: Sequence[str], seed: int, noise_percent: float) -> float:
    """Velocity noise [rad/s] of `noise_percent` % of the clean reference's velocity range."""
    if noise_percent == 0:
        return 0.0
    clean = reference_recording(list(structure), seed=seed)
    velocity = clean["velocity_rad_s"]
    return 0.01 * noise_percent * float(velocity.max() - velocity.min())


@task(name="load-drive-recording", retries=2, retry_delay_seconds=2, persist_result=False)
def load_recording(
    data: str | None, reference: Mapping[str, Any], emps_decimate: int = 10
) -> dict[str, Any]:
    """Validate a recording (CSV/Parquet, or the EMPS `.mat`) or simulate the paper's
    reference (`{"structure", "seed", "noise_percent"}`); store it as Parquet. Returns
    `{"path", "hash", "source"}`."""
    if data is None:
        structure, seed = list(reference["structure"]), int(reference["seed"])
        noise = reference_noise(structure, seed, float(reference["noise_percent"]))
        reference = {"structure": structure, "noise": noise, "seed": seed}
        frame = reference_recording(**reference)
        frame = validate_drive_recording(frame, source="reference recording")
        source = "reference:" + ",".join(f"{k}={v}" for k, v in sorted(reference.items()))
    elif data.lower().endswith(".mat"):
        frame = load_emps(data, decimate=emps_decimate)
        source = f"emps:{Path(data).resolve()}:decimate={emps_decimate}"
    else:
        frame = load_drive_recording(data)
        source = str(Path(data).resolve())
    digest = content_hash(frame)
    path = store_table(frame, load_settings().data_root / "drive" / "recordings", digest)
    return {"path": str(path), "hash": digest, "source": source}


def _evaluate_run_name() -> str:
    from prefect.runtime import task_run

    return f"evaluate {len(task_run.parameters.get('batch', []))} structures"


@task(
    name="evaluate-individuals", task_run_name=_evaluate_run_name, cache_policy=NONE,
    persist_result=False,
)  # fmt: skip
def evaluate_individuals(evaluate: Callable[[list], list], batch: Sequence[Any]) -> list:
    """Identify the parameters and the fitness of a batch of individuals."""
    return evaluate(list(batch))


def prefect_submit_batch(evaluate: Callable[[list], list], batch: list) -> Any:
    """`submit_batch` for `StructureSearch`: one task per batch, its Prefect future (the
    search waits for it when it needs the batch's evaluations)."""
    return evaluate_individuals.submit(evaluate, batch)


def prefect_map_batches(evaluate: Callable[[list], list], batches: list) -> list:
    """`map_batches` for the evidence's rival identifications
    (`models.drivetrain.structure_fit`): one task per batch, all submitted, then gathered."""
    futures = [evaluate_individuals.submit(evaluate, batch) for batch in batches]
    return [future.result() for future in futures]
