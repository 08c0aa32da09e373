"""Settings of the drive study `drive-structure-search`: the single source of the Prefect form,
the flow's parameters and the options of `greylab drive identify` (flows/cli_settings.py)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Annotated, Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from flows.cli_settings import Cli, Limit, explained, lab_form
from flows.data_refs import checked_data, data_choices
from flows.drive.choices import Boxes, DrivePreset, FrictionGain
from flows.drive.inputs import fit_structure, parse_prefilter, prefilter_cutoff, recording_scales
from models import limits
from models.drivetrain import REFERENCE_STRUCTURE
from models.drivetrain.gp.presets import (
    PAPER_GENERATIONS,
    PAPER_POPULATION,
    data_settings,
    emps_settings,
    paper_settings,
)
from models.drivetrain.gp.settings import GPSettings
from models.drivetrain.scales import Scales
from tracking.protocol import validate_experiment_name

_CAMPAIGN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def _submodel_choices(schema: dict[str, Any]) -> None:
    """The Prefect form's choice of submodels (names; the command line also takes codes)."""
    from models.drivetrain.submodels import Submodel

    schema["items"] = {"type": "string", "enum": [k.value for k in Submodel]}


class DriveSearch(BaseModel):
    """Settings of one structure search (the form in the Prefect UI)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=lab_form)

    data: Annotated[str | None, Cli(path=True)] = Field(
        None,
        json_schema_extra=data_choices("drive"),
        description="Recording: an ingested one as campaign:NAME@HASH (campaign:NAME: its "
        "newest), or a CSV/Parquet/EMPS .mat file inside the worker's data root; empty = "
        "the paper's simulated reference",
    )
    reference_structure: list[str] = Field(
        [str(getattr(k, "value", k)) for k in REFERENCE_STRUCTURE],
        json_schema_extra=_submodel_choices,
        description="True structure of the simulated reference recording (no data)",
    )
    noise_percent: float = Field(0.0, ge=0, description="Velocity noise, % of its range")
    reference_seed: int = Field(
        0, ge=0, description="Noise seed of the simulated reference recording"
    )
    validation_data: Annotated[str | None, Cli(path=True)] = Field(
        None,
        json_schema_extra=data_choices("drive"),
        description="Recording not used for identification (as data: campaign:NAME@HASH or a "
        "file inside the worker's data root): the identified model is simulated on it open "
        "loop; empty = no validation",
    )
    emps_decimate: int = Field(10, ge=1, description="EMPS: keep every k-th sample")
    preset: DrivePreset | None = Field(
        None,
        description=explained(
            "Settings preset; empty = data for a given recording, reference for the simulated one",
            DrivePreset,
        ),
    )
    paper: bool = Field(
        False,
        description="The seed paper's search (docs/methods.md §2.6): 6 individuals x 20 "
        "generations, roulette on raw fitness, no elite, every individual re-identified (one "
        "start, up to 500 evaluations), time-domain RSS (no prefilter, screening or position "
        "error); population and generations left at 10 become 6 and 20, other values and a "
        "test fraction are refused",
    )
    structure: Annotated[list[str], Cli(note="paper codes or names, e.g. 2,5,6,7")] = Field(
        [],
        json_schema_extra=_submodel_choices,
        description="Identify this structure only, with the evidence, instead of searching: "
        "its submodels, e.g. two_mass, coulomb, viscous, stribeck; empty = search "
        "(population and generations are not used for a fit)",
    )
    friction_gain: FrictionGain = Field(
        FrictionGain.auto,
        description=explained(
            "Friction smoothing gain (the steepness of the Coulomb and Stribeck friction): "
            "estimated by the fit or the preset's",
            FrictionGain,
        ),
    )
    boxes: Boxes = Field(
        Boxes.narrow,
        description=explained(
            "The data preset's parameter boxes around the recording's scales: narrow holds "
            "machines shaped like the paper's; wide any split of the inertia and springs over "
            "decades",
            Boxes,
        ),
    )
    prefilter: Annotated[str, Cli(note="spectrum, a cut-off in Hz (0: none) or empty")] = Field(
        "",
        description="Prefilter cut-off of the fitted output error: empty = the preset's (25 "
        "Hz; the data preset searches once more at a wider one where its answer's residual "
        "shows a periodic component above it; the paper's search has none), spectrum = the one the recording's spectrum "
        "suggests (twice the top of the band where its velocity stands above the noise, "
        "docs/drive.md), or a cut-off in Hz below the recording's Nyquist frequency (0: "
        "none)",
    )
    rivals: Annotated[bool, Cli(note="--no-rivals skips them")] = Field(
        True,
        description="Identify the answer's one-step neighbours for the rival table of the "
        "evidence (its costliest part); off keeps the parameter intervals and the residual "
        "tests only",
    )
    final_stage: Annotated[bool, Cli(note="--no-final-stage skips it")] = Field(
        True,
        description="The data preset's final stage: the search's best structures identified "
        "again with a named structure's continuations, and the answer chosen by the data's "
        "evidence (docs/drive.md; it costs about as much again as the search); off = the "
        "answer of the search's fitness. The reference, EMPS and paper searches have none",
    )
    population: Annotated[int, Limit("GREYLAB_MAX_POPULATION")] = Field(
        10, ge=2, description="Individuals per generation"
    )
    # population x generations is limited too: the form's maximum assumes the smallest population
    generations: Annotated[int, Limit("GREYLAB_MAX_GP_EVALUATIONS", per=2)] = Field(
        10,
        ge=1,
        description="Generations the search breeds (population x generations "
        "structures are identified at most)",
    )
    seed: int = Field(0, ge=0, description="Seed of the search")
    test_fraction: float = Field(0.0, ge=0, lt=0.9, description="Held-out tail for fitness")
    nominals: Annotated[
        dict[str, float], Cli(name="nominal", note="NAME=VALUE, repeat the option")
    ] = Field(
        {},
        description='Parameter nominals as JSON, e.g. {"J1": 0.02, "M_C": 0.4}; they replace '
        "the preset's values and bounds (bounds 50..200 %, gravity +-2|value|); {} = the "
        "preset's",
    )
    work_limit: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="Each identification's budget in state updates (its simulations' "
        "substeps x samples x states, a Jacobian 1 + parameters times): a fit it stops stops "
        "at the same point on any machine, where the wall-clock limit (120 s; 600 s for a "
        "named structure, which also gets 5x this) depends on the load; 0 = none",
    )
    batch_size: int = Field(0, ge=0, description="Individuals per task; 0 = spread over workers")
    workers: Annotated[int, Limit("GREYLAB_MAX_WORKERS")] = Field(
        2, ge=1, description="Parallel workers"
    )
    resume: Annotated[bool, Cli(name="cache", note="--no-cache starts over")] = Field(
        True,
        description="Resume from the checkpoint of an identical search (same recording, "
        "settings and greylab code); off starts over",
    )
    experiment: str = Field("drive-structure-search", description="MLflow experiment")
    register_model: Annotated[bool, Cli(note="--no-register-model skips it")] = Field(
        True,
        description="Log the identified model as an MLflow model and register it as "
        "drive-CAMPAIGN; off skips that",
    )
    campaign: str | None = Field(
        None,
        description="Registered model name drive-CAMPAIGN (letters, digits, ._-); empty = "
        "drive-HASH, the first 12 characters of the recording's content hash",
    )

    @field_validator("data", "validation_data")
    @classmethod
    def _data(cls, value: str | None) -> str | None:
        return checked_data(value, "drive")  # a dashboard user reads no other file

    @field_validator("prefilter")
    @classmethod
    def _prefilter(cls, value: str) -> str:
        return parse_prefilter(value)

    @field_validator("campaign")
    @classmethod
    def _campaign(cls, value: str | None) -> str | None:
        if value is not None and not _CAMPAIGN.match(value):
            raise ValueError("use 1-64 letters, digits or ._- starting with a letter or digit")
        return value

    @field_validator("nominals")
    @classmethod
    def _nominals(cls, value: dict[str, float]) -> dict[str, float]:
        """Known parameter names only (a typo would be ignored silently), each nominal a
        finite number of a recording's magnitude (`schemas.drive.MAX_MAGNITUDE`)."""
        from models.drivetrain.excitation import MAX_MAGNITUDE
        from models.drivetrain.submodels import PARAMETERS

        known = sorted({s.name for specs in PARAMETERS.values() for s in specs})
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown[:10]}; known: {', '.join(known)}")
        for name, number in value.items():
            if not abs(number) <= MAX_MAGNITUDE:
                raise ValueError(
                    f"{name}={number!r}: a nominal must be finite, at most {MAX_MAGNITUDE:g}"
                )
        return value

    @field_validator("experiment")
    @classmethod
    def _experiment(cls, value: str) -> str:
        return validate_experiment_name(value)

    @field_validator("reference_structure")
    @classmethod
    def _reference(cls, value: list[str]) -> list[str]:
        """Known submodels forming a valid structure: checked here, so that a typo fails
        the run once with its message instead of in the task that simulates it."""
        fit_structure(value)
        return value

    @field_validator("structure")
    @classmethod
    def _structure(cls, value: list[str]) -> list[str]:
        """Each element a known submodel (named when not), the whole a valid structure; kept
        as canonical names."""
        return fit_structure(value) if value else []

    @model_validator(mode="after")
    def _paper(self) -> DriveSearch:
        """`paper`: population and generations at greylab's defaults become the paper's 6 x 20
        (the form always sends every field, so "left at the default" is judged by value); any
        other value than the paper's is refused, as is a held-out tail (the paper fits and
        scores on the whole record). Runs before `_limits`, which checks the values used."""
        if not self.paper:
            return self
        fields = type(self).model_fields
        for name, value in (("population", PAPER_POPULATION), ("generations", PAPER_GENERATIONS)):
            given, default = getattr(self, name), fields[name].default
            if given == default:
                setattr(self, name, value)
            elif given != value:
                raise ValueError(
                    f"paper (--paper) is the paper's search with {name} {value}: got {given} "
                    f"(leave {name} at its default {default}, or drop --paper)"
                )
        if self.structure:
            raise ValueError(
                "paper (--paper) is the paper's search: a named structure is fitted without "
                "one (drop --paper or the structure)"
            )
        if self.prefilter:
            raise ValueError(
                f"paper (--paper) fits the time-domain output error without a prefilter: got "
                f"prefilter {self.prefilter!r} (leave --prefilter empty, or drop --paper)"
            )
        if self.test_fraction:
            raise ValueError(
                f"paper (--paper) fits and scores on the whole record: got test fraction "
                f"{self.test_fraction} (leave --test-fraction at 0, or drop --paper)"
            )
        return self

    @model_validator(mode="after")
    def _boxes(self) -> DriveSearch:
        """Wide boxes are the data preset's (the reference and EMPS presets name theirs)."""
        if self.boxes is Boxes.wide and self.resolved_preset() is not DrivePreset.data:
            raise ValueError(
                f"boxes 'wide' are drawn around a recording's own scales (the data preset); "
                f"the {self.resolved_preset().value} preset has its own: leave boxes narrow"
            )
        return self

    @model_validator(mode="after")
    def _friction_gain(self) -> DriveSearch:
        """A profiled friction gain is a named structure's fit or a search's final stage (a
        profile per individual of the generations would cost up to 9 fits each): a search
        without the final stage (the reference, EMPS or the paper's, `--no-final-stage`)
        refuses it."""
        if self.friction_gain is FrictionGain.profile and not self.structure:
            final = self.final_stage and not self.paper
            if not final or self.resolved_preset() is not DrivePreset.data:
                raise ValueError(
                    "friction gain 'profile' fits a named structure (drive fit --structure S) "
                    "or a search's final stage (the data preset with its final stage on); "
                    "this search has none: leave the gain auto or fixed"
                )
        return self

    def fit_gain(self) -> str:
        """The friction gain mode of a named structure's fit (`StructureFit`: fixed or
        profile; auto keeps the preset's)."""
        return "profile" if self.friction_gain is FrictionGain.profile else "fixed"

    @model_validator(mode="after")
    def _limits(self) -> DriveSearch:
        """Population, population x generations and workers within the machine's limits."""
        limits.check("population", self.population, "GREYLAB_MAX_POPULATION")
        limits.check(
            f"population x generations = {self.population} x {self.generations}",
            self.population * self.generations,
            "GREYLAB_MAX_GP_EVALUATIONS",
        )
        limits.check("workers", self.workers, "GREYLAB_MAX_WORKERS")
        return self

    def resolved_preset(self) -> DrivePreset:
        """`preset`, or when empty: `data` for a given recording (its own scales), the
        reference drive's for the simulated reference."""
        if self.preset is not None:
            return self.preset
        return DrivePreset.data if self.data else DrivePreset.reference

    def search_settings(
        self,
        preset: DrivePreset | None = None,
        *,
        scales: Scales | None = None,
        position: bool = False,
        prefilter_hz: float | None = None,
    ) -> GPSettings:
        """The GP settings the search runs with (default preset: `resolved_preset`): the
        preset's units (`data`: from ``scales``, with the position error when the recording
        has a ``position``), with `paper` the paper's search on them
        (`models.drivetrain.gp.presets.paper_settings`), then the study's nominals (each
        replaces the preset's value and bounds), population, generations, test fraction and
        work limit; without `final_stage` the preset's final stage is off (``final_top`` 0). A
        ``prefilter_hz`` (`flows.drive.inputs.prefilter_cutoff` of `prefilter` on the
        recording) replaces the preset's cut-off; None keeps it."""
        preset = preset or self.resolved_preset()
        if preset is DrivePreset.data:
            if scales is None:
                raise ValueError("the data preset needs the recording's scales")
            base = data_settings(scales, position=position, prefilter_hz=prefilter_hz,
                                 wide=self.boxes is Boxes.wide)  # fmt: skip
        else:
            base = emps_settings() if preset is DrivePreset.emps else GPSettings()
            if prefilter_hz is not None:
                base = replace(
                    base, identification=replace(base.identification, prefilter_hz=prefilter_hz)
                )
        if self.paper:
            base = paper_settings(base)
        nominals = tuple(sorted({**dict(base.nominals), **self.nominals}.items()))
        bounds = tuple((k, v) for k, v in base.bounds if k not in self.nominals)
        final_top = base.final_top if self.final_stage else 0
        ident = replace(base.identification, work_limit=self.work_limit)
        return replace(base, population=self.population, generations=self.generations,
                       test_fraction=self.test_fraction, nominals=nominals,
                       bounds=bounds, final_top=final_top, identification=ident)  # fmt: skip


class DriveFit(DriveSearch):
    """Settings of `greylab drive fit`: the drive study with a structure named (required) and
    the search's own settings hidden (a fit runs no generations)."""

    structure: list[str] = Field([], description=DriveSearch.model_fields["structure"].description)
    population: Annotated[int, Cli(hidden=True)] = Field(10, ge=2)
    generations: Annotated[int, Cli(hidden=True)] = Field(10, ge=1)
    batch_size: Annotated[int, Cli(hidden=True)] = Field(0, ge=0)
    paper: Annotated[bool, Cli(hidden=True)] = False
    resume: Annotated[bool, Cli(hidden=True)] = True
    final_stage: Annotated[bool, Cli(hidden=True)] = True

    @field_validator("structure")
    @classmethod
    def _named(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("name the structure to fit, e.g. 2,5,6,7 or two_mass,coulomb")
        return value

    def study(self) -> DriveSearch:
        """The drive study's settings the flow runs (the form's parameter)."""
        return DriveSearch(**self.model_dump())


def check_search_recording(frame: pd.DataFrame, study: DriveSearch, source: str) -> None:
    """What the search will refuse, checked before any server starts (issue 28): a recording
    longer than `GREYLAB_MAX_DRIVE_SAMPLES` (`models.budget`), a constant or near-constant
    input, for the `data` preset scales that explain nothing (`recording_scales`), and a
    prefilter cut-off the recording cannot carry (`prefilter_cutoff`)."""
    from models import budget
    from models.drivetrain.scales import check_excitation

    budget.check_samples(len(frame), source)
    u, v = (frame[c].to_numpy(float) for c in ("torque_Nm", "velocity_rad_s"))
    check_excitation(u, velocity=v, source=source)
    scales = None
    if study.resolved_preset() is DrivePreset.data:
        scales = recording_scales(frame, source=source)
    prefilter_cutoff(study.prefilter, frame, scales=scales, source=source)
