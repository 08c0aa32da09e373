"""A lab's own press model for greylab: a spring read by two displacement sensors.

A load F (N) compresses a spring of stiffness k (N/um); a probe at the tip reads the
compression, a second probe on a lever of ratio r reads r times it. `Spring` is linear;
`StiffeningSpring` adds a quadratic softening term c F^2 (um/N^2) to the tip reading.

greylab needs, per model (docs/models.md):
- ``name``: a short label used in tables and MLflow;
- ``parameters``: name -> start value of the fit (model units), in the order of ``p``;
- ``sensors``: sensor names, the column order of ``response`` (as in the table's ``sensor``);
- ``response(p, forces)``: displacements (um) of shape (n_q, n_S) for the n_q forces (N).
  It is called with numpy arrays AND with CasADi symbols (greylab differentiates it), so use
  arithmetic and ``casadi`` functions only, no ``if`` on values;
- optional ``bounds`` (name -> (low, high)), ``default_forces`` and ``nominal_sigma`` (a load
  scenario and sensor standard deviations, for sensor design before any measurement).

Run from this folder: ``greylab press detect --data spring.csv --model spring:Spring ...``
(a module in the current folder is found; elsewhere put it on PYTHONPATH or install it).
"""

from __future__ import annotations

import casadi as ca
import numpy as np


def _columns(tip, lever):
    """numpy in -> numpy out; CasADi symbols in -> a CasADi matrix out."""
    if isinstance(tip, ca.SX | ca.MX | ca.DM) or isinstance(lever, ca.SX | ca.MX | ca.DM):
        return ca.horzcat(tip, lever)
    return np.column_stack([tip, lever])


class Spring:
    name = "spring"
    parameters = {"k": 100.0, "r": 1.0}  # N/um, lever ratio
    bounds = {"k": (1.0, 1e4), "r": (0.01, 100.0)}
    sensors = ("tip", "lever")
    default_forces = np.r_[np.linspace(0.0, 2000.0, 11), np.linspace(1800.0, 0.0, 10)]
    nominal_sigma = {"tip": 0.05, "lever": 0.05}  # um

    def response(self, p, forces):
        k, r = p[0], p[1]
        return _columns(forces / k, r * forces / k)


class StiffeningSpring(Spring):
    name = "stiffening-spring"
    parameters = {"k": 100.0, "r": 1.0, "c": 0.0}  # c in um/N^2; a start of 0 is fine
    bounds = {**Spring.bounds, "c": (-1e-6, 1e-6)}

    def response(self, p, forces):
        k, r, c = p[0], p[1], p[2]
        return _columns(forces / k + c * forces**2, r * forces / k)
