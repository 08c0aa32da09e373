"""The friction gain chosen by the fit in the search's final stage (issue 26,
``StructureSearch(friction_gain=...)``; docs/methods.md §2.8, docs/drive.md "The friction gain
in the final stage").

Why: the kit smooths Coulomb and Stribeck friction with ``tanh(f_tanh dq)``, ``f_tanh`` a model
constant the ``data`` preset fixes at ``100 / v_max`` rounded; a machine whose friction turns
over faster or slower cannot be fitted by its own structure, and a richer one (a current loop,
a Stribeck term, a gravity torque) makes up for it: on the recovery benchmark's seed 1 the
truth's own fit was worse than the wrong answer's on 4 of 8 machines.

What: in the final stage (``gp.finalists``) every structure with Coulomb or Stribeck friction
is identified over the gain (``friction_gain.warm_profile``: the stage's own fit at the
preset's gain, then warm refits at other gains). The gain is then one more estimated parameter:
profiling over it is a least-squares fit of ``f_tanh`` too (a one-dimensional search nested
around the others), so the profiled fit counts ``d + 1`` parameters, in the fitness's penalty
(eq. 19) as in the evidence's F-test (``gp.selection``). The fit at the preset's gain is a
model of its own, with ``d``: the stage keeps whichever of the two is fitter by eq. 19 (a gain
whose RSS gain does not pay for its parameter is not taken). Each result is a
:class:`GainEvaluation` (an ``Evaluation`` with the gain it was fitted at, whether the gain
was estimated, and the profile); a structure without smoothed friction is identified once.
A fit the stage starts from the answer's parameters at an estimated gain (``IndividualSpec.
f_tanh``, ``finalists.nested_gain``) is profiled from that gain instead, and counts ``d + 1``
wherever the profile ends (the gain was chosen from these data either way); so a neighbour
the search fitted itself (from the preset's gain, ``d`` there) and one it never fitted can be
charged differently for the same RSS.

When: ``friction_gain="auto"`` (``StructureSearch``'s default) profiles in a search with the
final stage and the evidence's choice (``final_top > 0`` and ``final_alpha > 0``: the
``data`` preset, what a user's recording gets); the reference and EMPS presets and
``--paper`` have no final stage and are unchanged; ``"fixed"`` never profiles, ``"profile"``
whenever there is a final stage; ``"adapt"`` as ``"profile"``, and the generations adapt the
gain too (``gp.generation_gain``; opt-in: it did not raise the exact count on the recovery
benchmark's seed 1 and costs more, docs/methods.md §2.8).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, fields, replace
from typing import Any

from models.drivetrain.gp.evaluate import Evaluation, IndividualSpec, RecordingArrays, identify
from models.drivetrain.gp.recording import RecordingFile
from models.drivetrain.gp.settings import GPSettings

MODES = ("auto", "fixed", "profile", "adapt")


@dataclass(frozen=True)
class GainEvaluation(Evaluation):
    """An ``Evaluation`` of the final stage with its friction gain: ``f_tanh`` the gain the
    parameters were fitted at, ``gain_estimated`` whether it was (``n_params`` then counts it,
    and ``fitness`` charges it), ``gain_profile`` every ``(f_tanh, rss)`` tried."""

    f_tanh: float = 0.0
    gain_estimated: bool = False
    gain_profile: tuple[tuple[float, float], ...] = ()


def profiles(settings: GPSettings, mode: str) -> bool:
    """Whether a search with ``settings`` profiles the gain in its final stage (module
    docstring: ``auto`` on with the final stage and the evidence's choice)."""
    if mode not in MODES:
        from methods.errors import InputError

        raise InputError(f"friction_gain must be one of {', '.join(MODES)}, got {mode!r}")
    if settings.final_top <= 0 or mode == "fixed":
        return False
    return mode in ("profile", "adapt") or settings.final_alpha > 0


def identify_over_gain(
    spec: IndividualSpec, data: RecordingArrays, settings: GPSettings, seed: int = 0,
    centre_estimated: bool = False,
) -> Evaluation:  # fmt: skip
    """``spec`` identified over the friction gain (module docstring): the fitter by eq. 19 of
    the fit at ``settings.f_tanh`` (``d`` parameters) and the profile's best (``d + 1``), with
    the profile's simulations and wall time summed; a structure without smoothed friction is
    identified once (a plain ``Evaluation``). ``centre_estimated``: ``settings.f_tanh`` was
    itself estimated (adopted in the generations, ``gp.generation_gain``): the fit there
    counts ``d + 1`` too. A ``spec.f_tanh`` (a start fitted at an estimated gain, the stage's
    nested fits) is the profile's centre instead, estimated."""
    from models.drivetrain.friction_gain import SMOOTHED, warm_profile  # it imports this package

    if not SMOOTHED & set(spec.structure):
        return identify(spec, data, settings, seed)
    if spec.f_tanh is not None:
        settings, centre_estimated = replace(settings, f_tanh=spec.f_tanh), True
    prof = warm_profile(spec, data, settings, seed)
    centre, best = prof.centre or prof.evaluation, prof.evaluation
    d, k = best.n_params, settings.k_p
    # the whole profile's cost, and its stops: any gain's fit may have decided the gain
    cost = {"nfev": prof.nfev, "wall_s": prof.wall_s, "timed_out": bool(prof.timed_out)}
    charge = {"n_params": d + 1, "fitness": recharged(best.fitness, k, d, d + 1)}
    if centre_estimated:  # the centre's fit counts the gain too: the lower RSS wins
        return with_gain(best, prof.f_tanh, True, prof.profile, **cost, **charge)
    plain = with_gain(centre, settings.f_tanh, False, prof.profile, **cost)
    if best is centre:
        return plain
    estimated = with_gain(best, prof.f_tanh, True, prof.profile, **cost, **charge)
    return estimated if estimated.fitness > plain.fitness else plain


def with_gain(
    ev: Evaluation, f_tanh: float, estimated: bool, profile: tuple, **changes: Any
) -> GainEvaluation:
    """``ev`` as a ``GainEvaluation`` fitted at ``f_tanh`` (``changes``: fields replaced)."""
    values = {f.name: getattr(ev, f.name) for f in fields(Evaluation)}
    out = GainEvaluation(**values, f_tanh=float(f_tanh), gain_estimated=estimated,
                         gain_profile=tuple(profile))  # fmt: skip
    return replace(out, **changes)


def recharged(fitness: float, k_p: float, d: int, d_to: int) -> float:
    """Eq. 19's fitness of a fit counted with ``d_to`` parameters instead of ``d`` (its penalty
    ``1 + k_p d`` exchanged): a gain estimated (``d + 1``) or no longer counted."""
    return fitness * (1.0 + k_p * d) / (1.0 + k_p * d_to)


def evaluate_batch(
    batch: list[IndividualSpec], data: RecordingArrays, settings: GPSettings, seed: int = 0,
    centre_estimated: bool = False,
) -> list[Evaluation]:  # fmt: skip
    """:func:`identify_over_gain` for every spec of a batch (pure, picklable)."""
    return [identify_over_gain(spec, data, settings, seed, centre_estimated) for spec in batch]


def evaluate_stored(
    batch: list[IndividualSpec], recording: RecordingFile, settings: GPSettings, seed: int = 0,
    centre_estimated: bool = False,
) -> list[Evaluation]:  # fmt: skip
    """:func:`evaluate_batch` on a stored recording, read once per worker process."""
    return evaluate_batch(batch, recording.arrays(), settings, seed, centre_estimated)


def batch_function(
    recording: Any, data: RecordingArrays, settings: GPSettings, seed: int,
    centre_estimated: bool = False,
) -> Any:  # fmt: skip
    """The stage's picklable batch evaluator over the gain (a stored recording: its path)."""
    centre = bool(centre_estimated)
    if isinstance(recording, RecordingFile):
        return functools.partial(evaluate_stored, recording=recording, settings=settings,
                                 seed=seed, centre_estimated=centre)  # fmt: skip
    return functools.partial(evaluate_batch, data=data, settings=settings, seed=seed,
                             centre_estimated=centre)  # fmt: skip


def gain_of(ev: Evaluation, default: float) -> float:
    """The gain ``ev`` was fitted at (``default``: the search's, for a plain evaluation)."""
    return float(ev.f_tanh) if isinstance(ev, GainEvaluation) else float(default)


def estimated(ev: Evaluation) -> bool:
    return isinstance(ev, GainEvaluation) and ev.gain_estimated


def record(best: Evaluation, settings: GPSettings, mode: str, profiled: bool) -> dict:
    """``StructureSearch.friction_gain_``: the mode, whether the stage profiled, the preset's
    gain, the answer's (``f_tanh``: the model's), whether it was estimated, its profile."""
    return {"mode": mode, "profiled": bool(profiled), "preset_f_tanh": float(settings.f_tanh),
            "f_tanh": gain_of(best, settings.f_tanh), "estimated": estimated(best),
            "profile": [[g, r if math.isfinite(r) else None]
                        for g, r in getattr(best, "gain_profile", ())]}  # fmt: skip
