"""The recording a search identifies against: a validated table as plain arrays, or a stored
file that crosses process boundaries instead of the arrays.

A `RecordingFile` (path of a content-addressed Parquet table and its content hash) is what a
search ships to parallel workers: each worker process reads the file once (cached by path and
hash), so a generation's tasks carry a few bytes instead of the whole recording.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from methods.errors import InputError
from models import budget
from models.drivetrain.gp.evaluate import (
    Evaluation,
    IndividualSpec,
    RecordingArrays,
    evaluate_batch,
)
from models.drivetrain.gp.settings import GPSettings
from models.drivetrain.scales import check_excitation


@dataclass(frozen=True)
class RecordingFile:
    """A stored drive recording (Parquet, see `schemas.drive`) named by path and content hash;
    the hash keys the per-process cache, so a rewritten file is never mistaken for the old."""

    path: str
    digest: str

    def arrays(self) -> RecordingArrays:
        return _read(self.path, self.digest)


@functools.lru_cache(maxsize=4)
def _read(path: str, digest: str) -> RecordingArrays:
    return as_arrays(pd.read_parquet(path))


def as_arrays(recording: Any) -> RecordingArrays:
    """A validated drive recording (DataFrame, see ``schemas.drive``, or a `RecordingFile`) as
    plain arrays."""
    if isinstance(recording, RecordingArrays):
        return recording
    if isinstance(recording, RecordingFile):
        return recording.arrays()
    if not isinstance(recording, pd.DataFrame):
        raise InputError(
            "fit() expects a drive-recording DataFrame, RecordingFile or RecordingArrays"
        )
    from schemas.drive import validate_drive_recording

    budget.check_samples(len(recording), "recording")
    frame = validate_drive_recording(recording, source="recording")
    check_excitation(
        frame["torque_Nm"].to_numpy(float), velocity=frame["velocity_rad_s"].to_numpy(float)
    )
    t = frame["t_s"].to_numpy(float)
    return RecordingArrays(
        u=frame["torque_Nm"].to_numpy(float).copy(),
        y=frame["velocity_rad_s"].to_numpy(float).copy(),
        dt=float((t[-1] - t[0]) / (t.size - 1)),
        q=frame["position_rad"].to_numpy(float).copy() if "position_rad" in frame else None,
    )


def evaluate_stored(
    batch: list[IndividualSpec], recording: RecordingFile, settings: GPSettings, seed: int = 0
) -> list[Evaluation]:
    """`evaluate_batch` on a stored recording, read once per worker process."""
    return evaluate_batch(batch, recording.arrays(), settings, seed)


def batch_function(
    recording: Any, data: RecordingArrays, settings: GPSettings, seed: int
) -> Callable[[list[IndividualSpec]], list[Evaluation]]:
    """A search's picklable batch evaluator (a stored recording: its path and hash, read once
    per worker, instead of the arrays)."""
    if isinstance(recording, RecordingFile):
        return functools.partial(evaluate_stored, recording=recording, settings=settings, seed=seed)
    return functools.partial(evaluate_batch, data=data, settings=settings, seed=seed)
