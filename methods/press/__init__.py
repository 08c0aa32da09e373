"""Model-uncertainty detection for the press (docs/methods.md section 1).

Subpackages by concern: ``lsq`` (least squares: LM, problem, fits, covariance), ``design``
(sensor design, branch-and-bound), ``uncertainty`` (splits, statistics and corrections tables,
tests, normality, ellipsoids, prediction); ``data`` and ``plots`` here.

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
    from methods.press.design.sensors import Criterion, SensorDesign, sensor_design
    from methods.press.lsq.estimation import ParameterFit, fit_parameters
    from methods.press.lsq.lm import StopReason
    from methods.press.uncertainty.detection import Detection
    from methods.press.uncertainty.ellipsoid import Ellipsoid
    from methods.press.uncertainty.hypothesis import (
        FitNotConvergedError,
        Prepared,
        combine_tests,
        detect_model_uncertainty,
        prepare,
        run_split_batch,
    )
    from methods.press.uncertainty.normality import NormalityReport, check_normality
    from methods.press.uncertainty.prediction import (
        PressPrediction,
        PressValidation,
        predict_displacements,
        validate_predictions,
    )
    from methods.press.uncertainty.splits import Split, SplitKind, make_splits
    from methods.press.uncertainty.tables import Correction, Statistic

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
        "Criterion": "design.sensors",
        "SensorDesign": "design.sensors",
        "sensor_design": "design.sensors",
        "Detection": "uncertainty.detection",
        "Ellipsoid": "uncertainty.ellipsoid",
        "ParameterFit": "lsq.estimation",
        "fit_parameters": "lsq.estimation",
        "Correction": "uncertainty.tables",
        "FitNotConvergedError": "uncertainty.hypothesis",
        "Prepared": "uncertainty.hypothesis",
        "Statistic": "uncertainty.tables",
        "combine_tests": "uncertainty.hypothesis",
        "detect_model_uncertainty": "uncertainty.hypothesis",
        "prepare": "uncertainty.hypothesis",
        "run_split_batch": "uncertainty.hypothesis",
        "StopReason": "lsq.lm",
        "NormalityReport": "uncertainty.normality",
        "check_normality": "uncertainty.normality",
        "PressPrediction": "uncertainty.prediction",
        "PressValidation": "uncertainty.prediction",
        "predict_displacements": "uncertainty.prediction",
        "validate_predictions": "uncertainty.prediction",
        "Split": "uncertainty.splits",
        "SplitKind": "uncertainty.splits",
        "make_splits": "uncertainty.splits",
    },
)
