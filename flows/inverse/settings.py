"""Settings of the inverse study `inverse-simulation`: the single source of the Prefect form, the
flow's parameters and the options of `greylab inverse run` (flows/cli_settings.py).

The settings alone bound the study's size (simulations, and steps where the horizon is given
here); whether the systems, parameters and demand fit together is checked, with the systems
built, by `models.underactuated.study.check_study` (the one check of the command line and the flow).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from flows.cli_settings import Cli, Limit, explained, lab_form
from methods.dae import Method
from models import limits
from tracking.protocol import validate_experiment_name

StepSize = Annotated[float, Field(gt=0, le=1.0, allow_inf_nan=False)]


def _system_choices(schema: dict[str, Any]) -> None:
    """The Prefect form's multi-select: the built-in systems and the lab systems this worker
    allows (entry points `greylab.systems`, GREYLAB_ALLOWED_SYSTEMS; nothing imported)."""
    from models.underactuated import SYSTEMS
    from models.underactuated.plugins import allowed_systems

    schema["items"] = {"type": "string", "enum": [*SYSTEMS, *sorted(allowed_systems())]}
    schema["uniqueItems"] = True


class InverseStudy(BaseModel):
    """Settings of one inverse simulation study (the form in the Prefect UI)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=lab_form)

    systems: Annotated[list[str], Cli(hidden=True), Limit("GREYLAB_MAX_INVERSE_RUNS")] = Field(
        ["planar_crane"],
        min_length=1,
        json_schema_extra=_system_choices,
        description="Systems simulated in parallel: the built-in ones and the lab's own "
        "systems this worker allows",
    )
    method: Method = Field(
        Method.EULER, description=explained("Integration method (euler: the paper's)", Method)
    )
    dt: StepSize = Field(1e-3, description="Step size [s]")
    dts: Annotated[list[StepSize] | None, Cli(hidden=True)] = Field(
        None,
        description="Several step sizes [s], each simulated in parallel; replaces dt; "
        "empty = dt alone",
    )
    t_end: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="End time [s]; empty = the demand's"
    )
    overrides: Annotated[
        dict[str, float], Cli(name="set", note="NAME=VALUE, repeat the option")
    ] = Field(
        {},
        description="Parameter overrides as JSON: a name for every system or system.name for "
        'one, e.g. {"planar_crane.m": 8.0}; {} = none',
    )
    demand: Annotated[dict[str, Any] | None, Cli(hidden=True)] = Field(
        None,
        description='Demand as JSON in the format of docs/inverse.md, e.g. {"t_end": 5.0}; '
        "empty = each system's default",
    )
    forward_check: Annotated[bool, Cli(name="check")] = Field(
        True, description="Forward check: re-simulate with the computed controls"
    )
    raise_on_failure: Annotated[bool, Cli(hidden=True)] = Field(
        True, description="Fail the flow run (after recording) when any simulation failed"
    )
    experiment: str = Field("inverse-simulation", description="MLflow experiment")

    # Flow parameters may come from the dashboard: a system names code only through the
    # worker's allow-list (models/underactuated/plugins.py), checked without importing it.
    @field_validator("systems")
    @classmethod
    def _systems(cls, value: list[str]) -> list[str]:
        from models.underactuated.plugins import check_system_reference

        return [check_system_reference(s) for s in value]

    @field_validator("experiment")
    @classmethod
    def _experiment(cls, value: str) -> str:
        return validate_experiment_name(value)

    @model_validator(mode="after")
    def _limits(self) -> InverseStudy:
        """Simulations per study, and steps per simulation ((t_end - t_start) / dt) where the
        settings give the horizon, within the machine's limits (`models.limits`)."""
        sizes = self.step_sizes()
        limits.check(
            f"simulations (systems x step sizes = {len(self.systems)} x {len(sizes)})",
            len(self.systems) * len(sizes),
            "GREYLAB_MAX_INVERSE_RUNS",
        )
        horizon = self.horizon()
        if horizon is not None:
            limits.inverse_steps(horizon[0], horizon[1], min(sizes))
        return self

    def horizon(self) -> tuple[float, float] | None:
        """(t_start, t_end) as far as the settings give it (None: the systems' defaults)."""
        demand = self.demand or {}
        t_start = demand.get("t_start", 0.0)
        t_end = self.t_end if self.t_end is not None else demand.get("t_end")
        if not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in (t_start, t_end)
        ):
            return None
        return float(t_start), float(t_end)  # type: ignore[arg-type]

    def step_sizes(self) -> list[float]:
        """`dts` (or `dt`), without repeats, in the given order."""
        return list(dict.fromkeys(float(h) for h in (self.dts or [self.dt])))
