"""The drive study's choices (enumerations of its settings, `flows.drive.settings`): the
Prefect form's drop-downs and the values `greylab drive identify|fit` accepts."""

from __future__ import annotations

from enum import StrEnum


class FrictionGain(StrEnum):
    """auto: a search's final stage estimates the gain (data preset), a named structure's fit
    keeps the preset's; fixed: the preset's friction smoothing gain everywhere; profile: the
    gain that fits the recording best, by a profile of the fit over it (a named structure: at
    most 9 fits; a search: its final stage, as auto)."""

    auto = "auto"
    fixed = "fixed"
    profile = "profile"


class Boxes(StrEnum):
    """narrow: inertias J/4..1.5 J around half the rigid-body total, friction 50..200 % of its
    estimate, springs and dampers 50..200 % around a mode at 3x the rigid band (issue 13);
    wide: any share of the inertia from 5 %, friction 10x either side, springs and dampers
    over decades around the resonance the recording's spectrum shows (issue 26; docs/drive.md
    "Other machines")."""

    narrow = "narrow"
    wide = "wide"


class DrivePreset(StrEnum):
    """data: nominals, bounds and friction gain from the recording's own scales; reference:
    the paper's rotary drive units; emps: the prismatic EMPS drive, tuned by hand."""

    data = "data"
    reference = "reference"
    emps = "emps"
