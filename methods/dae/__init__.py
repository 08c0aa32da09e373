"""Inverse dynamics of underactuated systems in partly specified motion (docs/methods.md §3).

Public API::

    ServoProblem(name) ... .setup()                 declare, then set up (problem.py)
    solve_inverse(problem, demand, method=, dt=, t_end=) -> InverseResult
    parse_demand(dict, output_names) -> Demand      the documented demand format
    forward_check(problem, result) -> ForwardCheck  re-simulate with the computed controls
"""

from methods.dae.demand import Demand, parse_demand
from methods.dae.forward import ForwardCheck, forward_check
from methods.dae.inverse import DemandSmoothnessWarning, consistent_start, solve_inverse
from methods.dae.problem import InverseProblemError, RankInfo, RankPolicy, ServoProblem
from methods.dae.result import InverseResult
from methods.dae.solvers import Method

__all__ = [
    "Demand",
    "DemandSmoothnessWarning",
    "ForwardCheck",
    "InverseProblemError",
    "InverseResult",
    "Method",
    "RankInfo",
    "RankPolicy",
    "ServoProblem",
    "consistent_start",
    "forward_check",
    "parse_demand",
    "solve_inverse",
]
