"""Model-uncertainty tests and products of the press (docs/methods.md sections 1.5-1.7).

``splits`` the calibration/validation splits, ``tables`` the statistics and corrections (one
row each: covariance, null distribution, decision rule), ``hypothesis`` Algorithm 1 (prepare,
run split batches, combine), ``detection`` its result, ``normality`` the residual checks,
``ellipsoid`` confidence ellipsoids, ``prediction`` a calibrated model's predictions and their
validation. No re-exports.
"""
