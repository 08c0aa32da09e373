"""Settings presets for recordings whose units are not the paper's rotary drive.

EMPS (the prismatic benchmark drive, `schemas.drive.load_emps`): masses in kg, stiffnesses in
N/m, damping and viscous friction in N s/m, forces in N, velocities in m/s. The nominal values
centre the 50..200 % bounds on a ~100 kg carriage; the constant offset (gravity submodel,
`M_G = -offset`) may take either sign within +-20 N; the friction tanh gain is 1000 s/m (the
paper's 10 s/rad would smear Coulomb friction over the whole 0..0.2 m/s range). The fit also
matches the measured position (`position_weight = 1`, see `models.drivetrain.gp.evaluate`): the open-loop
position drift pins the mean force balance and hence the offset.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from models.drivetrain.gp.settings import GPSettings, IdentificationSettings

EMPS_NOMINALS = {
    "J1": 100.0, "J2": 50.0, "J3": 50.0, "J4": 50.0, "c1": 1e6, "c2": 1e6, "c3": 1e6,
    "d1": 1000.0, "d2": 1000.0, "d3": 1000.0, "f_v": 200.0, "M_C": 20.0, "M_S": 10.0,
    "dq0": 0.01, "alpha": 1e-4, "T_1": 0.01, "T_d": 0.01,
}  # fmt: skip
EMPS_BOUNDS = {"M_G": (-20.0, 20.0)}
EMPS_F_TANH = 1000.0
#: IDIM-LS reference values of the data set's description (M_G = -offset)
EMPS_PUBLISHED = {"J1": 95.1089, "f_v": 203.5034, "M_C": 20.3935, "M_G": 3.1648}


def emps_settings(*, position_weight: float = 1.0, **overrides: Any) -> GPSettings:
    """GP settings for the EMPS recording; `overrides` are further `GPSettings` fields."""
    base = GPSettings(
        nominals=EMPS_NOMINALS,  # type: ignore[arg-type]  # normalised to sorted tuples
        bounds=EMPS_BOUNDS,  # type: ignore[arg-type]
        f_tanh=EMPS_F_TANH,
        identification=replace(IdentificationSettings(), position_weight=position_weight),
    )
    return replace(base, **overrides)
