"""Lab systems written in the user protocol (docs/models.md) for the tests and the benchmark:
the built-in planar crane again (from its energies, so the two can be compared), and the
crank hoist of examples/crank_hoist written by hand as a `ServoProblem` (the other way)."""

from __future__ import annotations

import casadi as ca

from methods.dae import ServoProblem


class LabPlanarCrane:
    """The planar overhead crane of models/underactuated/cranes.py, from its energies."""

    name = "lab_planar_crane"
    description = "planar overhead crane written by a lab (same physics as planar_crane)"
    coordinates = ("s", "l", "theta")
    controls = ("F", "M_w")
    outputs = ("x", "z")

    def __init__(self) -> None:
        self.parameters = {"m_t": 10.0, "m": 5.0, "r": 0.05, "J": 0.01, "g": 9.81}
        self.units = {"m_t": "kg", "m": "kg", "J": "kg m^2", "r": "m", "g": "m/s^2"}
        self.nominal = {"l": 2.0}
        self.bounds = {"l": (0.05, None)}
        step = {"type": "step", "degree": 9}
        self.default_demand = {
            "t_end": 8.0,
            "outputs": {
                "x": {**step, "start": 0.0, "end": 3.0, "t0": 1.0, "t1": 6.0},
                "z": {**step, "start": -2.0, "end": -1.5, "t0": 2.0, "t1": 6.0},
            },
        }

    def kinetic_energy(self, q, v, p):
        l, th = q[1], q[2]
        ds, dl, dth = v[0], v[1], v[2]
        dx = ds + dl * ca.sin(th) + l * ca.cos(th) * dth  # load velocity
        dz = -dl * ca.cos(th) + l * ca.sin(th) * dth
        return (0.5 * p["m_t"] * ds**2 + 0.5 * p["m"] * (dx**2 + dz**2)
                + 0.5 * p["J"] * (dl / p["r"]) ** 2)  # fmt: skip

    def potential_energy(self, q, p):
        return -p["m"] * p["g"] * q[1] * ca.cos(q[2])

    def input_forces(self, q, u, p):
        return [u[0], -u[1] / p["r"], 0]

    def output(self, q, p):
        return [q[0] + q[1] * ca.sin(q[2]), -q[1] * ca.cos(q[2])]


def hand_written_crank_hoist(p: dict[str, float]) -> ServoProblem:
    """examples/crank_hoist's equations of motion written out by hand (no energies)."""
    pb = ServoProblem("crank_hoist_by_hand")
    q = pb.coordinates(["phi", "z"], nominal=[0.0, -1.0], bounds={"phi": (-1.5, 1.5)})
    v = pb.velocities
    pb.controls(["tau"])
    e = p["r"] * ca.sin(q[0]) - q[1] - p["L"]
    f = ca.vertcat(-p["k"] * e * p["r"] * ca.cos(q[0]) - p["b"] * v[0],
                   p["k"] * e - p["m"] * p["g"] - p["c"] * v[1])  # fmt: skip
    pb.set_dynamics(M=ca.diag(ca.DM([p["J"], p["m"]])), f=f, G=ca.DM([[1.0], [0.0]]))
    pb.set_outputs(q[1], ["z"])
    pb.steady_closure = True  # as for every lab system (methods/dae/start.py)
    return pb.setup()


__all__ = ["LabPlanarCrane", "hand_written_crank_hoist"]
