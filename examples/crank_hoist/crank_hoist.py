"""A crank hoist: a motor turns a crank of radius r; an elastic rope (stiffness k, rest length
L) runs from the crank tip down to a load m guided vertically. The motor torque tau must make
the load follow a demanded height z(t). Not one of greylab's built-in systems.

Coordinates phi (crank angle, rad, 0 = horizontal) and z (load height, m); the rope's
stretch is e = r sin(phi) - z - L. Derivation of the exact (flat) solution: README.md here.
"""

import casadi as ca
import numpy as np


class CrankHoist:
    name = "crank_hoist"
    description = "motor-driven crank lifts a load through an elastic rope; demand: load height z"
    parameters = {
        "J": 0.5,
        "r": 0.5,
        "k": 2.0e4,
        "L": 1.0,
        "m": 10.0,
        "g": 9.81,
        "c": 20.0,
        "b": 0.2,
    }
    units = {
        "J": "kg m^2",
        "r": "m",
        "k": "N/m",
        "L": "m",
        "m": "kg",
        "g": "m/s^2",
        "c": "N s/m",
        "b": "N m s/rad",
    }
    coordinates = ("phi", "z")
    controls = ("tau",)
    outputs = ("z",)
    nominal = {"phi": 0.0, "z": -1.0}  # start guess of the steady state
    bounds = {"phi": (-1.5, 1.5)}  # the crank stays below its dead centres (+-pi/2)
    default_demand = {
        "t_end": 4.0,
        "outputs": {
            "z": {"type": "step", "start": -1.2, "end": -0.9, "t0": 0.5, "t1": 3.0, "degree": 9}
        },
    }

    def kinetic_energy(self, q, v, p):
        return 0.5 * p["J"] * v[0] ** 2 + 0.5 * p["m"] * v[1] ** 2

    def potential_energy(self, q, p):
        stretch = p["r"] * ca.sin(q[0]) - q[1] - p["L"]
        return 0.5 * p["k"] * stretch**2 + p["m"] * p["g"] * q[1]

    def dissipation(self, q, v, p):  # crank bearing friction b, load damping c
        return [-p["b"] * v[0], -p["c"] * v[1]]

    def input_forces(self, q, u, p):  # the motor torque acts on phi only
        return [u[0], 0]

    def output(self, q, p):
        return [q[1]]

    def exact_solution(self, t, y, p):
        """The flat solution (README.md): everything from z and its derivatives y["z"][j]."""
        z = y["z"]
        J, r, k, L, m, g, c, b = (p[s] for s in ("J", "r", "k", "L", "m", "g", "c", "b"))
        e = (m * (z[2] + g) + c * z[1]) / k  # rope stretch
        w = (z[0] + L + e) / r  # sin(phi)
        w1 = (z[1] + (m * z[3] + c * z[2]) / k) / r
        w2 = (z[2] + (m * z[4] + c * z[3]) / k) / r
        s = np.sqrt(1.0 - w**2)  # cos(phi) > 0
        phi1 = w1 / s
        phi2 = w2 / s + w * w1**2 / s**3
        tau = J * phi2 + b * phi1 + k * e * r * s
        return {"phi": np.arcsin(w), "z": z[0], "v_phi": phi1, "v_z": z[1], "tau": tau}
