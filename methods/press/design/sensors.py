"""Optimal sensor design: criteria A (trace), D (log det), E (largest eigenvalue) of C(omega).

For a sensor subset ``omega`` the information and second-order term are sums over sensors,
``M(omega) = sum_k omega_k M_k``, ``S(omega) = sum_k omega_k S_k`` (evaluated at one parameter
vector: the all-sensor estimate, or ``parameters``), and ``C(omega)`` is Bard's covariance
(``C1`` when A is not positive definite). Unidentifiable subsets (rank < n_p or scaled
condition > 1e12) get infinite criteria. Small ``n_S``: exhaustive enumeration here; large
``n_S``: ``methods.press.design.bnb.branch_and_bound`` on the first-order information.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, cast

import numpy as np
import pandas as pd

from methods.errors import InputError
from methods.press.data import resolve_sigma
from methods.press.design.bnb import DesignResult, branch_and_bound  # noqa: F401  (re-exported)
from methods.press.design.search import (
    ENUMERATION_LIMIT,
    Budget,
    check_costs,
    check_search_limits,
    enumerate_subsets,
    search_subsets,
    subset_count,
)
from methods.press.lsq.core import compile_model, parameter_arrays
from methods.press.lsq.covariance import bard_covariance
from methods.press.lsq.estimation import aggregate, fit_parameters, model_data
from methods.press.uncertainty.splits import parse_enum


class Criterion(StrEnum):
    """A: trace of the covariance (mean variance); D: its log determinant (ellipsoid
    volume); E: its largest eigenvalue (longest ellipsoid axis)."""

    A = "A"
    D = "D"
    E = "E"


def criteria(C: np.ndarray) -> dict[str, float]:
    """A = trace C, D = log det C, E = lambda_max(C); inf when C is not finite."""
    if not np.all(np.isfinite(C)):
        return {"A": np.inf, "D": np.inf, "E": np.inf}
    ev = np.linalg.eigvalsh(C)
    logdet = float(np.sum(np.log(ev))) if ev[0] > 0 else np.inf
    return {"A": float(np.trace(C)), "D": logdet, "E": float(ev[-1])}


@dataclass(frozen=True)
class SensorDesign:
    """Result of ``sensor_design``: ``table`` (code, sensors, n_sensors, A, D, E, identifiable,
    condition, second_order), ``best`` (record of the best identifiable subset, or None),
    ``criterion``, ``parameters`` (where the design was evaluated), ``sensors`` (model order),
    ``search``: how the subsets were found (``method`` enumeration or branch-and-bound, its
    nodes, gap, seconds; the ``budget``; where the ``second_order`` terms come from)."""

    table: pd.DataFrame
    best: dict[str, Any] | None
    criterion: str
    parameters: dict[str, float]
    sensors: tuple[str, ...]
    search: dict[str, Any] = field(default_factory=dict)

    def runners_up(self, n: int = 5) -> pd.DataFrame:
        """The next best identifiable subsets after ``best`` (by the design criterion)."""
        ok = self.table[self.table["identifiable"]].sort_values(self.criterion, kind="stable")
        return ok.iloc[1 : n + 1]

    @property
    def best_sensors(self) -> list[str]:
        """Sensor names of the best identifiable subset (model order)."""
        if self.best is None:
            raise InputError(
                f"no sensor subset identifies the parameters {list(self.parameters)} "
                f"(sensors {list(self.sensors)}): add sensors or fix parameters"
            )
        return str(self.best["sensors"]).split(",")

    def summary(self) -> str:
        lines = [f"sensor design ({self.criterion}-criterion), sensors {', '.join(self.sensors)}"]
        for rec in self.table.to_dict("records"):
            flag = "" if rec["identifiable"] else "  (not identifiable)"
            lines.append(
                f"  {rec['code']}: A={rec['A']:.4g} D={rec['D']:.4g} E={rec['E']:.4g}{flag}"
            )
        if self.best is None:
            lines.append("  no identifiable subset")
        else:
            lines.append(f"  best: {self.best['code']} ({self.best['sensors']})")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        def plain(v: Any) -> Any:
            v = v.item() if isinstance(v, np.generic) else v
            return None if isinstance(v, float) and not np.isfinite(v) else v

        d = {
            "criterion": self.criterion,
            "parameters": {k: float(v) for k, v in self.parameters.items()},
            "sensors": list(self.sensors),
            "best": None if self.best is None else {k: plain(v) for k, v in self.best.items()},
            "table": [{k: plain(v) for k, v in r.items()} for r in self.table.to_dict("records")],
            "search": _plain_tree(self.search),
            "runners_up": self.runners_up()["code"].tolist(),
        }
        json.dumps(d)
        return d


def _plain_tree(value: Any) -> Any:
    """JSON-safe copy: numpy scalars as Python numbers, inf/NaN as None."""
    if isinstance(value, dict):
        return {str(k): _plain_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain_tree(v) for v in value]
    value = value.item() if isinstance(value, np.generic) else value
    return None if isinstance(value, float) and not np.isfinite(value) else value


def sensor_blocks(
    model: Any,
    table: pd.DataFrame | None,
    *,
    parameters: Mapping[str, float] | None = None,
    sigma: Mapping[str, float] | pd.DataFrame | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, float]]:
    """Per-sensor information ``M_k`` and second-order terms ``S_k`` (n_S, n_p, n_p), the
    parameter scales, and the parameters used. Without a table: the model's
    ``default_forces`` scenario, one series, zero residuals (``S_k = 0``)."""
    names, p0, scale, _, _ = parameter_arrays(model)
    n_s = len(model.sensors)
    if table is not None:
        data, _ = model_data(model, table, None)
        sig, _ = resolve_sigma(sigma, data)
        if parameters is None:
            fit = fit_parameters(model, table, sigma=dict(zip(data.sensors, sig)))
            parameters = fit.parameters
        q = data.setpoints
        zbar, wt, _ = aggregate(data.z, np.ones(data.z.shape), sig)
    else:
        forces = getattr(model, "default_forces", None)
        if forces is None:
            raise InputError("design without data needs a table or model.default_forces")
        q = np.asarray(forces, dtype=float)
        if sigma is None:
            sigma = getattr(model, "nominal_sigma", None)
        if sigma is None:
            raise InputError("design without data needs sigma= (sensor -> std in um)")
        if isinstance(sigma, pd.DataFrame):  # a sensor sheet
            sigma = dict(zip(sigma["sensor"].astype(str), sigma["sigma_um"].astype(float)))
        missing = [s for s in model.sensors if s not in sigma]
        if missing:
            raise InputError(f"sigma lacks sensor(s) {missing}; given for {sorted(sigma)}")
        sig = np.array([float(sigma[s]) for s in model.sensors])
        wt = np.broadcast_to(1.0 / sig**2, (q.size, n_s))
        zbar = None
    p = np.array([float((parameters or {}).get(n, v)) for n, v in zip(names, p0)])
    comp = compile_model(model, q.size)
    h, J = comp.eval_hJ(p, q)
    wt = np.asarray(wt).ravel()
    r = np.zeros_like(h) if zbar is None else h - np.asarray(zbar).ravel()
    sensor_of = np.tile(np.arange(n_s), q.size)
    M = np.empty((n_s, len(names), len(names)))
    S = np.zeros_like(M)
    for k in range(n_s):
        wk = wt * (sensor_of == k)
        M[k] = J.T @ (wk[:, None] * J)
        if zbar is not None:
            S[k] = comp.eval_S(p, q, wk * r)
    return M, S, scale, dict(zip(names, p.tolist()))


def sensor_design(
    model: Any,
    table: pd.DataFrame | None,
    *,
    n_sensors: int | None,
    criterion: Criterion | str = Criterion.E,
    parameters: Mapping[str, float] | None = None,
    sigma: Mapping[str, float] | pd.DataFrame | None = None,
    max_sensors: int | None = None,
    costs: Mapping[str, float] | None = None,
    budget: float | None = None,
    candidates: Sequence[str] | None = None,
    refit: bool = False,
    gap_tol: float = 0.01,
    time_limit: float = 60.0,
) -> SensorDesign:
    """The best sensor subset under a budget: exactly ``n_sensors`` (None: any number), at most
    ``max_sensors``, total ``costs`` at most ``budget``, among ``candidates`` (default: every
    model sensor). Code "110" = first two model sensors kept. A sensor reads the whole
    scenario, so fewer sensors than parameters can identify a model: identifiability is the
    covariance's rank test (column ``identifiable``), not a count.

    Up to `ENUMERATION_LIMIT` admissible subsets are enumerated, each judged on Bard's
    covariance with the second-order terms of the all-sensor fit, or, with ``refit`` and a
    table, of a fit on that subset's own data. Beyond, branch-and-bound finds the best subset
    of each admissible size on the first-order information with a proven ``gap_tol`` (within
    ``time_limit`` seconds in all); those subsets are then judged as above (``method``,
    ``search`` say which)."""
    crit = parse_enum(Criterion, criterion, "criterion")
    sensors = tuple(model.sensors)
    n_s = len(sensors)
    check_search_limits(gap_tol, time_limit)
    plan = Budget(exactly=n_sensors, at_most=max_sensors, cost=budget)
    keep = _candidates(sensors, candidates)
    cost = None if costs is None else np.array([_cost(costs, sensors[k]) for k in keep])
    cost = check_costs(cost, plan, len(keep))
    sizes = plan.sizes(len(keep))
    if candidates is not None:
        sigma = _complete_sigma(model, table, sigma)
    M, S, scale, used = sensor_blocks(model, table, parameters=parameters, sigma=sigma)
    if subset_count(len(keep), sizes) <= ENUMERATION_LIMIT:
        subsets = enumerate_subsets(len(keep), sizes, cost, budget)
        method, search = "enumeration", dict[str, Any](subsets=len(subsets))
    else:
        if plan.exactly is None and plan.at_most is None and budget is None:
            raise InputError(f"{len(keep)} candidate sensors are too many to try every number: "
                             "give exactly n (n_sensors), at most n (max_sensors) or a budget")  # fmt: skip
        if not np.any(S[keep]) and plan.exactly is None and budget is None:
            sizes = sizes[-1:]  # first-order only: more sensors never raise the criterion
        subsets, search = search_subsets(M[keep], sizes, crit.value, costs=cost, max_cost=budget,
                                         gap_tol=gap_tol, time_limit=time_limit,
                                         at_most=max_sensors)  # fmt: skip
        method = "branch-and-bound"
    if not subsets:
        raise InputError(f"no sensor subset fits the budget ({plan.describe()})")
    judge = _refitted(model, table, sigma, sensors) if refit and table is not None else None
    rows = []
    for local in subsets:
        subset = [keep[k] for k in local]
        Mi, Si = (M, S) if judge is None else judge(subset)
        cov = bard_covariance(Mi[subset].sum(axis=0), Si[subset].sum(axis=0), scale)
        rows.append({
            "code": "".join("1" if k in subset else "0" for k in range(n_s)),
            "sensors": ",".join(sensors[k] for k in subset), "n_sensors": len(subset),
            **criteria(cov.C), "identifiable": cov.identifiable, "condition": cov.condition,
            "second_order": cov.second_order_used,
            **({} if cost is None else {"cost": float(cost[list(local)].sum())}),
        })  # fmt: skip
    tab = pd.DataFrame(rows)
    ok = tab[tab["identifiable"]]
    best: dict[str, Any] | None = None
    if not ok.empty:
        label = cast(int, ok[crit.value].idxmin())  # tab has the default RangeIndex
        best = cast(dict[str, Any], ok.loc[label].to_dict())  # one row: column -> value
    search = {"method": method, "budget": plan.describe(),
              "second_order": "refitted per subset" if judge is not None else
              ("at the all-sensor fit" if table is not None else "none (no data)"), **search}  # fmt: skip
    return SensorDesign(tab, best, crit.value, used, sensors, search)


def _complete_sigma(model: Any, table: pd.DataFrame | None, sigma: Any) -> Any:
    """A candidate sheet may list only some sensors: the others get the repeats' estimate
    (with data) or the model's nominal sigma, else 1 (without data they are never chosen)."""
    if sigma is None or isinstance(sigma, pd.DataFrame):
        return sigma
    missing = [s for s in model.sensors if s not in sigma]
    if not missing:
        return sigma
    if table is not None:
        data, _ = model_data(model, table, None)
        from methods.press.data import sigma_from_repeats

        known = dict(zip(data.sensors, sigma_from_repeats(data.z).tolist()))
    else:
        known = dict(getattr(model, "nominal_sigma", None) or {})
    return {**{s: float(known.get(s, 1.0)) for s in missing}, **sigma}


def _candidates(sensors: tuple[str, ...], candidates: Sequence[str] | None) -> list[int]:
    if candidates is None:
        return list(range(len(sensors)))
    unknown = [c for c in candidates if c not in sensors]
    if unknown:
        raise InputError(f"candidate sensor(s) {unknown[:10]} are not sensors of the model "
                         f"({list(sensors)[:20]})")  # fmt: skip
    return sorted({sensors.index(c) for c in candidates})


def _cost(costs: Mapping[str, float], sensor: str) -> float:
    if sensor not in costs:
        raise InputError(f"no cost for candidate sensor {sensor!r}")
    return float(costs[sensor])


def _refitted(
    model: Any, table: pd.DataFrame, sigma: Any, sensors: tuple[str, ...]
) -> Callable[[list[int]], tuple[np.ndarray, np.ndarray]]:
    """Blocks at the parameters fitted on a subset's own data (zero blocks, i.e. not
    identifiable, when the subset cannot be fitted on its own)."""

    def blocks(subset: list[int]) -> tuple[np.ndarray, np.ndarray]:
        try:
            fit = fit_parameters(model, table, sensors=[sensors[k] for k in subset], sigma=sigma)
        except InputError:
            fit = None
        if fit is None or not fit.identifiable:  # no information: judged not identifiable
            zero = np.zeros((len(sensors), len(model.parameters), len(model.parameters)))
            return zero, zero
        M, S, _, _ = sensor_blocks(model, table, parameters=fit.parameters, sigma=sigma)
        return M, S

    return blocks
