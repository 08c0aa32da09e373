"""The ``Detection`` result of ``detect_model_uncertainty`` / ``combine_tests``."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not np.isfinite(v):
        return None
    return v


REJECTED, PASSES, INCONCLUSIVE = "model uncertainty detected", "passes", "inconclusive"
VERDICTS = (REJECTED, PASSES, INCONCLUSIVE)


@dataclass(frozen=True)
class Detection:
    """Verdict of the model-uncertainty test.

    Fields: ``model``, ``split``, ``statistic``, ``correction``, ``tol``; ``n_tests`` (family
    size used by the correction); ``rejected`` (True: model uncertainty detected);
    ``alpha_min`` (n_tests,) p-values; ``threshold`` = tol / n_tests (Bonferroni level, and
    Holm's first step); ``tests`` (one row per test: test, axis, cal, val, p_cal_*, p_val_*,
    T, alpha_min, ok, failure, threshold, rejected); ``n_rejections``; ``warnings``;
    ``n_failed`` tests without a p-value (a fit did not converge or is not identifiable);
    ``inconclusive`` (too many failed, see ``methods.press.uncertainty.hypothesis``: then ``rejected`` is
    False); ``verdict`` one of ``VERDICTS``.
    """

    model: str
    split: str
    statistic: str
    correction: str
    tol: float
    n_tests: int
    rejected: bool
    alpha_min: np.ndarray
    threshold: float
    tests: pd.DataFrame
    n_rejections: int
    warnings: tuple[str, ...] = ()
    n_failed: int = 0
    inconclusive: bool = False

    @property
    def verdict(self) -> str:
        """ "model uncertainty detected", "passes" or "inconclusive"."""
        if self.inconclusive:
            return INCONCLUSIVE
        return REJECTED if self.rejected else PASSES

    def with_warning(self, text: str) -> Detection:
        return dataclasses.replace(self, warnings=(*self.warnings, text))

    def summary(self) -> str:
        verdict = {
            REJECTED: "model uncertainty DETECTED",
            PASSES: "no model uncertainty detected",
            INCONCLUSIVE: "INCONCLUSIVE (too many failed fits)",
        }[self.verdict]
        a = self.alpha_min[np.isfinite(self.alpha_min)]
        amin = f"{a.min():.3g}" if a.size else "n/a"
        lines = [
            f"{self.model}: {verdict} ({self.n_rejections} of {self.n_tests} {self.split} tests"
            f" reject; {self.statistic} statistic, {self.correction}, TOL {self.tol},"
            f" threshold {self.threshold:.3g}, smallest alpha_min {amin}"
            + (f"; {self.n_failed} failed" if self.n_failed else "")
            + ")"
        ]
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        d = {
            "model": self.model,
            "split": self.split,
            "statistic": self.statistic,
            "correction": self.correction,
            "tol": float(self.tol),
            "n_tests": int(self.n_tests),
            "rejected": bool(self.rejected),
            "alpha_min": [_plain(float(x)) for x in self.alpha_min],
            "threshold": float(self.threshold),
            "n_rejections": int(self.n_rejections),
            "n_failed": int(self.n_failed),
            "inconclusive": bool(self.inconclusive),
            "verdict": self.verdict,
            "warnings": list(self.warnings),
            "tests": [
                {k: _plain(v) for k, v in rec.items()} for rec in self.tests.to_dict("records")
            ],
        }
        json.dumps(d)
        return d
