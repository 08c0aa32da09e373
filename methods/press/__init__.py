"""Model-uncertainty detection for the press (docs/methods.md section 1).

Pipeline: ``correct_to_setpoints`` -> ``check_normality`` -> ``sensor_design`` ->
``fit_parameters`` -> ``detect_model_uncertainty`` (or, for orchestration, ``prepare`` ->
``make_splits`` -> ``run_split_batch`` per batch -> ``combine_tests``). The fitting functions
evaluate the model at the setpoint forces, so they take a table already corrected to setpoints.
A calibrated model as a product: ``predict_displacements`` (mean and delta-method std for a
force scenario) and ``validate_predictions`` (against a new measurement table).
"""

from typing import TYPE_CHECKING

from methods._lazy import lazy_exports

if TYPE_CHECKING:
    from methods.press.data import PressData, correct_to_setpoints, sigma_from_repeats, to_cube
    from methods.press.design import Criterion, SensorDesign, sensor_design
    from methods.press.detection import Detection
    from methods.press.ellipsoid import Ellipsoid
    from methods.press.estimation import ParameterFit, fit_parameters
    from methods.press.hypothesis import (
        Correction,
        FitNotConvergedError,
        Prepared,
        Statistic,
        combine_tests,
        detect_model_uncertainty,
        prepare,
        run_split_batch,
    )
    from methods.press.lm import StopReason
    from methods.press.normality import NormalityReport, check_normality
    from methods.press.prediction import (
        PressPrediction,
        PressValidation,
        predict_displacements,
        validate_predictions,
    )
    from methods.press.splits import Split, SplitKind, make_splits

__all__ = [
    "Correction",
    "Criterion",
    "Detection",
    "Ellipsoid",
    "FitNotConvergedError",
    "NormalityReport",
    "ParameterFit",
    "Prepared",
    "PressData",
    "PressPrediction",
    "PressValidation",
    "SensorDesign",
    "Split",
    "SplitKind",
    "Statistic",
    "StopReason",
    "check_normality",
    "combine_tests",
    "correct_to_setpoints",
    "detect_model_uncertainty",
    "fit_parameters",
    "make_splits",
    "predict_displacements",
    "prepare",
    "run_split_batch",
    "sensor_design",
    "sigma_from_repeats",
    "to_cube",
    "validate_predictions",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "PressData": "data",
        "correct_to_setpoints": "data",
        "sigma_from_repeats": "data",
        "to_cube": "data",
        "Criterion": "design",
        "SensorDesign": "design",
        "sensor_design": "design",
        "Detection": "detection",
        "Ellipsoid": "ellipsoid",
        "ParameterFit": "estimation",
        "fit_parameters": "estimation",
        "Correction": "hypothesis",
        "FitNotConvergedError": "hypothesis",
        "Prepared": "hypothesis",
        "Statistic": "hypothesis",
        "combine_tests": "hypothesis",
        "detect_model_uncertainty": "hypothesis",
        "prepare": "hypothesis",
        "run_split_batch": "hypothesis",
        "StopReason": "lm",
        "NormalityReport": "normality",
        "check_normality": "normality",
        "PressPrediction": "prediction",
        "PressValidation": "prediction",
        "predict_displacements": "prediction",
        "validate_predictions": "prediction",
        "Split": "splits",
        "SplitKind": "splits",
        "make_splits": "splits",
    },
)
