"""Pure numerical core of greylab.

Imports numpy, scipy, casadi and pandas only: never prefect or mlflow (a test enforces it).
The press API (docs/methods.md section 1) is re-exported here for notebooks and flows, lazily
(`methods._lazy`): importing `methods.errors` does not load the press core.
"""

from typing import TYPE_CHECKING

from methods._lazy import lazy_exports
from methods.errors import InputError

if TYPE_CHECKING:
    from methods.press import (
        Correction,
        Criterion,
        Detection,
        Ellipsoid,
        NormalityReport,
        ParameterFit,
        SensorDesign,
        SplitKind,
        Statistic,
        check_normality,
        combine_tests,
        correct_to_setpoints,
        detect_model_uncertainty,
        fit_parameters,
        make_splits,
        prepare,
        run_split_batch,
        sensor_design,
    )
    from methods.protocol import ResponseModel

__all__ = [
    "Correction",
    "Criterion",
    "Detection",
    "Ellipsoid",
    "InputError",
    "NormalityReport",
    "ParameterFit",
    "ResponseModel",
    "SensorDesign",
    "SplitKind",
    "Statistic",
    "check_normality",
    "combine_tests",
    "correct_to_setpoints",
    "detect_model_uncertainty",
    "fit_parameters",
    "make_splits",
    "prepare",
    "run_split_batch",
    "sensor_design",
]

__getattr__ = lazy_exports(
    __name__,
    {name: "press" for name in __all__ if name not in ("InputError", "ResponseModel")}
    | {"ResponseModel": "protocol"},
)
