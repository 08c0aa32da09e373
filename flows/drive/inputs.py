"""What the drive study checks of its inputs before it searches: a named structure's
submodels, the recording (its scales) and the prefilter cut-off asked for (`DriveSearch.prefilter`: the
preset's, the recording spectrum's or one in Hz).

Every error names the option or the file and what is wrong; the command line runs these
checks before any server starts (`flows.drive.settings.check_search_recording`), the flow
again on what it loaded."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from methods.errors import InputError
from models.drivetrain.scales import Scales, estimate_scales

#: `--prefilter spectrum`: the cut-off the recording's spectrum suggests (Scales.prefilter_hz)
SPECTRUM = "spectrum"
#: a cut-off in Hz as text: digits, an optional fraction and exponent (no sign, no inf/nan)
_HZ = re.compile(r"^[0-9]{1,12}(\.[0-9]{0,12})?([eE][+-]?[0-9]{1,3})?$")


def fit_structure(value: list[str]) -> list[str]:
    """A structure to fit as canonical submodel names; a ValueError names the element that is
    not a submodel (its position and text) or the construction rule broken."""
    from models.drivetrain.submodels import Submodel, parse_structure

    # "{2,5,6,7}" (the paper's way), "2,5,6,7" in one form field, or one element each
    value = [p.strip() for v in value for p in str(v).strip().strip("{}").split(",")]
    value = [p.strip("{} ") for p in value if p.strip("{} ")]
    if len(value) > 20:
        raise ValueError(f"{len(value)} elements: a structure has at most 11 submodels")
    for i, element in enumerate(value, 1):
        try:
            Submodel.parse(element)
        except InputError:  # its message quotes the whole element: name it short instead
            names = ", ".join(k.value for k in Submodel)
            raise ValueError(
                f"element {i} {element[:40]!r}{'...' if len(element) > 40 else ''}: not a "
                f"submodel (a paper code 1..11 or a name: {names})"
            ) from None
    try:
        return [k.value for k in parse_structure(value)]
    except InputError as exc:
        raise ValueError(str(exc)) from None


def parse_prefilter(value: str) -> str:
    """`--prefilter` as the study keeps it: '' (the preset's cut-off), 'spectrum', or a
    cut-off in Hz >= 0 as plain decimal text ('0': no prefilter). A ValueError names what
    was given and what is accepted."""
    text = str(value).strip().lower()
    if text in ("", SPECTRUM):
        return text
    shown = f"{text[:40]!r}{'...' if len(text) > 40 else ''}"
    if not _HZ.match(text) or not math.isfinite(float(text)):
        raise ValueError(
            f"{shown}: give 'spectrum' (the recording's own cut-off), a cut-off in Hz such as "
            "25 or 62.5 (0: no prefilter), or leave it empty for the preset's"
        )
    return text


def sample_time(recording: pd.DataFrame) -> float:
    """The recording's mean sample time [s] from its ``t_s`` column (validated increasing by
    `schemas.drive`)."""
    t = np.asarray(recording["t_s"], float)
    return float((t[-1] - t[0]) / (t.size - 1)) if t.size > 1 else math.nan


def prefilter_cutoff(
    prefilter: str, recording: pd.DataFrame, *, scales: Scales | None = None,
    source: str = "recording",
) -> float | None:  # fmt: skip
    """The prefilter cut-off [Hz] a study's ``prefilter`` (`parse_prefilter`) asks for on
    this recording; None: the preset's
    own (25 Hz; the paper's search none). 'spectrum' is the recording spectrum's suggestion
    (``scales.prefilter_hz`` when the scales are given, `models.drivetrain.spectrum`
    otherwise); a cut-off in Hz must lie below the recording's Nyquist frequency."""
    if not prefilter:
        return None
    if prefilter == SPECTRUM:
        if scales is not None:
            return scales.prefilter_hz
        from models.drivetrain.spectrum import prefilter_choice

        velocity = np.asarray(recording["velocity_rad_s"], float)
        try:
            return prefilter_choice(velocity, sample_time(recording)).cutoff_hz
        except InputError as exc:
            raise InputError(f"{source}: --prefilter spectrum: {exc}") from None
    hz, dt = float(prefilter), sample_time(recording)
    if not hz < 0.5 / dt:
        raise InputError(
            f"{source}: --prefilter {hz:g} Hz is not below the recording's Nyquist frequency "
            f"{0.5 / dt:.4g} Hz (sampled every {dt:.4g} s): give a lower cut-off, 0 for none, "
            "or 'spectrum'"
        )
    return hz


def recording_scales(recording: pd.DataFrame, *, source: str = "recording") -> Scales:
    """The recording's own scales for the `data` preset (`models.drivetrain.scales`), checked
    to give nominals; the error names the file (`source`) and the way out (a preset or typed
    nominals)."""
    try:
        scales = estimate_scales(recording, source=source)
        scales.nominals()
    except InputError as exc:
        text = str(exc) if str(exc).startswith(f"{source}:") else f"{source}: {exc}"
        raise InputError(
            f"{text}; name the parameters' magnitudes instead (--preset reference|emps, "
            f"--nominal NAME=VALUE)"
        ) from None
    return scales
