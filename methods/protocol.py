"""The ``ResponseModel`` protocol: what the numerical core needs from a physical model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class ResponseModel(Protocol):
    """A quasi-static response model of a machine under an ordered input scenario.

    Attributes:
        name: short identifier used in reports ("M3").
        parameters: ordered mapping name -> initial value (the fit's start, model units).
        sensors: sensor names, the column order of ``response``.
        bounds (optional): mapping name -> (lower, upper); missing means unbounded.
        default_forces (optional): the nominal scenario (n_q,) for designs without data.
        nominal_sigma (optional): sensor -> std (um) for designs without data.

    ``response(p, forces)`` returns the displacements for the whole ordered scenario, shape
    ``(n_q, n_S)`` (um), given ``p`` in ``parameters`` order and ``forces`` (n_q,) in N. It
    must evaluate on numpy arrays AND on CasADi symbols (``p`` an ``SX`` column, ``forces`` an
    ``SX`` column): use ``casadi.fmax``/``fmin``/``sqrt`` (which also accept floats) instead of
    Python branches on values, and return a ``casadi.SX`` matrix for symbolic inputs. The core
    differentiates it exactly (Jacobian and second derivatives).
    """

    @property
    def name(self) -> str: ...

    @property
    def parameters(self) -> Mapping[str, float]: ...

    @property
    def sensors(self) -> Sequence[str]: ...

    def response(self, p: Any, forces: Any) -> Any: ...
