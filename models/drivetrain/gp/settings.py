"""Typed settings of the degenerate GP (frozen dataclasses, picklable, JSON-able)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from methods.errors import InputError
from models.drivetrain.submodels import DEFAULT_F_TANH, ParameterSpec, Submodel, parameter_specs

SELECTIONS = ("rank", "roulette", "tournament")


@dataclass(frozen=True)
class IdentificationSettings:
    """Per-individual bounded least squares (scipy ``least_squares``, TRF, exact Jacobians).

    ``n_starts``: the inherited start plus ``n_starts - 1`` uniform random starts in the box;
    ``max_nfev``: residual evaluations per start; ``time_limit_s``: wall-clock budget per
    individual (checked between evaluations; the best point so far is kept). The time limit is
    a safety net: if it triggers, results may depend on machine load (``Evaluation.timed_out``).
    ``work_limit`` (0: off): the same budget counted in state updates
    (``budget.SimulationCost.work`` of every simulation, a Jacobian ``1 + n_p`` times;
    ``objective.Clock``): a fit it stops stops at the same point on any machine under any
    load (``Evaluation.timed_out`` too).
    ``jit``: compile simulators to C (cached on disk) with optimisation level ``jit_opt`` on the
    ``jit_after``-th request of a structure in a process (``auto``: ``-O0`` at once, the
    cheapest for structures identified once, and ``-O1`` for simulators with many substeps, see
    ``models.drivetrain.simulate.optimisation``).

    ``prefilter_hz`` (beyond the paper; 0 = off): prefiltered output error. Residuals
    ``r = F(y_sim) - F(y)`` with ``F`` a zero-phase 4th-order Butterworth low-pass at
    ``prefilter_hz`` (forward-backward, ``scipy.signal.sosfiltfilt``), the same ``F`` on the
    Jacobian columns; RSS and fitness are those of the filtered residual. ``F`` is linear, so a
    model that reproduces ``y`` exactly still has ``RSS = 0``; white measurement noise of
    variance ``sigma^2`` contributes ``~ N sigma^2 * 2 f_c / f_s`` instead of ``N sigma^2``.
    Why: the paper's fitness ``1 / (RSS (1 + k_P d))`` multiplies RSS by ``1 + k_P d``; with
    noise RSS is ``~N sigma^2`` for every good model, and a model missing a submodel whose
    effect is a few % of the noise RSS (e.g. Stribeck at 1 % noise) wins by having fewer
    parameters. Filtering out the noise above the drive's bandwidth keeps the model error
    visible. A cutoff at or above the Nyquist frequency disables the filter. Default 25 Hz:
    above the reference drive's 14 Hz resonance and the EMPS position loop (20 Hz), below the
    1 kHz Nyquist frequency by 20x (noise RSS / 20). With 1 % noise on the reference record
    (``N sigma^2`` = 63) {2,5,6} (model error 3.5) beats the true {2,5,6,7} without it
    (67 * 13 < 63 * 17) and loses with it (6.6 * 13 > 3.2 * 17).
    The recording's scales also suggest a cut-off from its spectrum (twice the top of the band
    where its velocity stands above its noise, 25 Hz .. a quarter of the sampling rate:
    ``models.drivetrain.spectrum``, ``Scales.prefilter_hz``); the ``data`` preset runs with it
    only when asked (``presets.data_settings(prefilter_hz=...)``).
    ``screen_nfev`` (beyond the paper; 0 = off): residual evaluations per start of the cheap
    first stage that every new structure gets; only promising structures (the search's
    ``refine_top``) are refined with one start of up to ``max_nfev`` from the screened values.
    ``screen_fraction`` (beyond the paper; 1 = off): the screening stage fits the head of the
    record (this share of it; the fitness is still that of the whole record at the screened
    parameters), because a simulation costs in proportion to its length: on EMPS the stiff
    structures (backlash: 32 RK4 substeps per sample) took 89 of 117 s of a search.
    ``position_weight`` (beyond the paper; 0 = off): weight of the position error (the integral
    of the simulated velocity against a measured ``position_rad``) relative to the velocity
    error, see ``models.drivetrain.gp.evaluate``.
    ``stop_at_floor``: skip the remaining starts once a start reaches the RSS floor (an exact
    fit; the evaluation module's floor) - saves time on noise-free data only.
    ``log_scale`` (issue 26; ``False``: the linear box coordinates of earlier versions): a
    parameter whose box lies above zero is searched in ``log(p)`` (inertias, stiffnesses,
    friction levels, time constants; not the gravity torque), so that a box over decades is
    searched evenly and the random starts are spread log-uniformly over it.
    ``extend_rounds`` (issue 26; 0: off): a full identification (a refinement, or any without
    screening) that ends on ``max_nfev`` while its last round still lowered the cost by more
    than 1 % has stalled on the budget, not converged: it goes on from its end point, at most
    this many more rounds of ``max_nfev``.
    ``backlash_smoothing`` (issue 26; empty: off): a full identification of a structure with
    backlash first fits the smoothed gap law with these widths (shares of ``alpha``, widest
    first), then the exact law from there (``models.drivetrain.gp.continuation``); off in
    a named structure's fit too since 2026-12-07 (the exact law locates its impacts).
    ``ladder_seed`` (issue 26; off): a full identification of a three- or four-mass structure
    also starts from the fit of the same structure with one inertia fewer (its last inertia
    split, joined by a spring like or 10x stiffer than the others; ``from_simpler``).
    The ladder is off in a search (an EMPS search refining backlash structures hit the 120 s
    time limit) and on in the fit of a named structure (``structure_fit.fit_settings``:
    ``CONTINUATION``).
    """

    n_starts: int = 2
    max_nfev: int = 40
    screen_nfev: int = 10
    screen_fraction: float = 0.5
    position_weight: float = 0.0
    time_limit_s: float = 120.0
    work_limit: float = 0.0
    ftol: float = 1e-10
    xtol: float = 1e-10
    gtol: float = 1e-10
    jit: bool = True
    jit_opt: str = "auto"
    jit_after: int = 1
    prefilter_hz: float = 25.0
    stop_at_floor: bool = True
    log_scale: bool = True
    extend_rounds: int = 3
    backlash_smoothing: tuple[float, ...] = ()
    ladder_seed: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "backlash_smoothing", tuple(map(float, self.backlash_smoothing)))
        if not all(w > 0 for w in self.backlash_smoothing):
            raise InputError("backlash_smoothing widths must be > 0")
        if (
            self.n_starts < 1
            or self.max_nfev < 1
            or self.screen_nfev < 0
            or self.extend_rounds < 0
            or not self.time_limit_s > 0
        ):
            raise InputError("n_starts and max_nfev must be >= 1 and time_limit_s > 0")
        if self.jit_opt not in ("auto", "-O0", "-O1", "-O2") or self.jit_after < 1:
            raise InputError("jit_opt must be auto, -O0, -O1 or -O2 and jit_after >= 1")
        if not 0.0 < self.screen_fraction <= 1.0:
            raise InputError(f"screen_fraction must be in (0, 1], got {self.screen_fraction!r}")
        if not self.work_limit >= 0 or self.work_limit == float("inf"):
            raise InputError(f"work_limit must be a finite number >= 0 (0: off), got "
                             f"{self.work_limit!r}")  # fmt: skip
        if not self.prefilter_hz >= 0 or not self.position_weight >= 0:
            raise InputError("prefilter_hz and position_weight must be >= 0 (0: off)")


@dataclass(frozen=True)
class GPSettings:
    """Every probability and size of the search.

    Paper values: population 6, generations 20, k_P = 2 (all it fixes:
    ``presets.paper_settings``, ``--paper``). The paper gives no values for ``p_clone``, the
    mutation probabilities (each applied independently to every new individual) or a tree-size
    bound (its initial trees grow up to the largest valid structure, 8 nodes, and only the
    construction rules bound growth); ours (``p_clone`` 0.5, point/insertion/deletion 0.2,
    chromosome 0.05, ``max_nodes`` 6) keep offspring close to good parents: with
    ``p_chromosome`` 0.1, ``max_nodes`` 8 and weak selection most new structures were 3-8
    submodels away from the best one and the search drifted to large, expensive trees.
    ``n_elite`` (beyond the paper: the best individuals pass unchanged; 0 reproduces the paper).
    ``nominals``/``bounds``: per-recording parameter nominals (bounds follow as 50..200 %) and
    explicit bounds; ``f_tanh`` [s/(unit of velocity)] the fixed friction tanh gain;
    ``allowed``: the function set (restrict it to add prior knowledge).
    ``test_fraction``: identify on the head of the record, fitness RSS on the held-out tail.

    Beyond the paper (each can be switched back to the paper's behaviour):

    - ``selection``: ``"tournament"`` (default): best of ``tournament_size`` (4) uniform
      draws, i.e. the best of P individuals is a parent with probability ``1 - (1 - 1/P)^4``
      (34 % for P = 10) whatever the fitness values; ``"rank"``: linear-rank roulette,
      ``P(i) = w_i / sum w`` with ``w_i = 2 - s + 2 (s - 1) (r_i - 1) / (P - 1)``, ``r_i`` =
      rank (1 = worst), ``s`` = ``selection_pressure`` in [1, 2]; ``"roulette"``: the paper's
      roulette on raw fitness (values differ by > 1e3 between structures, so one individual
      takes over the population). Measured: with rank selection (best drawn 2/P) the search
      stayed at {2,5,6} for 6 generations without trying {2,5,6,7}.
    - ``structure_cache``: identify each structure once per search; a structure that reappears
      gets the evaluation (and identified parameters) of its first identification. The paper
      re-identifies from inherited parameters, which rarely improves and costs most of the time.
    - ``avoid_duplicates``: a new individual whose structure is already in the new population
      is mutated again (up to ``novelty_tries`` times); ``avoid_revisits``: likewise for
      structures identified in earlier generations. Both spend the evaluations on new
      structures; elites are exempt.
    - ``refine_top``: with screening (``identification.screen_nfev > 0``) the ``refine_top``
      fittest not yet refined structures of each generation get the full identification.
    - ``refine_at_once`` (with screening and ``refine_top > 0``): from the second generation
      on, a new structure whose screened fitness reaches the ``refine_top``-th best fitness of
      the previous generation is refined by the worker that screened it, in the same call;
      no other is refined (the first generation and the local search refine their
      ``refine_top`` fittest after screening). ``False``: every generation refines its
      ``refine_top`` fittest not yet refined structures after its screening, a second round
      trip in which all but ``refine_top`` workers idle. Measured on the reference (10 x 10,
      2 workers, ``benchmarks/drive_timeline.py --refine-at-once off|on --breed-ahead 0``):
      the wall time not covered by the identifications' work fell from 1.00 to 0.61 s.
    - ``breed_ahead`` (0 = off; at most ``population - n_elite - 1`` are used): the last
      ``breed_ahead`` offspring of each breeding are bred
      for the generation after next: they are started after the next generation's
      individuals and join the generation after it, so with an asynchronous backend
      (``StructureSearch(submit_batch=...)``) a worker that finishes its last identification
      of a generation has work while the search waits for the other workers and breeds. The
      search does not depend on the backend or on timing: a synchronous ``map_batches`` gives
      the same result (without the overlap). Measured on the reference (10 x 10, 2 workers,
      ``benchmarks/drive_timeline.py --breed-ahead 0|1``): the workers' time between batches
      fell from 0.75 to 0.33 worker-seconds and the wall time not covered by the
      identifications' work from 0.61 to 0.31 s.
    - ``simplify_best``: one offspring slot per generation (taken from the crossover children)
      goes to a not yet identified structure one step simpler than the population's best
      (one non-mass submodel deleted, or one inertia fewer; ``operators.simplifications``),
      with the best's parameters inherited. Measured on EMPS (seed 0, before this move): the
      search ended at {1,5,6,8,10} without ever trying the fitter {1,5,6,8} (a mutated copy
      of the best loses one given submodel of four with probability ``p_deletion / 4``).
    - ``polish_rounds`` (beyond the paper; 0 = off): after the last generation, a local search
      from the best structure: every one-step neighbour (``operators.neighbours``: one
      submodel deleted or added, one inertia fewer or more; parameters inherited, new ones at
      their nominals) is evaluated as a generation is (screening, the fittest refined); the
      best moves to a fitter neighbour, at most this many times. Measured on the reference with
      1 % noise (seeds 2 and 9): the truth, one step from where the GP ended, was fitter but
      never tried (``benchmarks/drive_search.py rates --noise-percent 1``).
    - ``final_top`` (issue 26; 0 = off, the ``data`` preset's 3): after the local search, the
      ``final_top`` fittest structures and every structure one step simpler than the best are
      identified again with a named structure's continuations (``drive fit``'s: ladders from
      one inertia fewer, rounds of 100 evaluations) and the fittest
      becomes the best; when it moved, its simpler neighbours likewise, ``final_rounds`` rounds
      in all (``models.drivetrain.gp.finalists``): inside the search a multi-mass or backlash
      fit stalls and a richer structure makes up for it.
    - ``final_alpha`` (issue 26; 0 = off: the fittest by eq. 19 is the answer; the ``data``
      preset's 0.01; used only with ``final_top > 0``): the final stage's answer follows the
      data's evidence: the fitness's answer moves to a richer structure while one fits
      significantly better, an F-test on the fitness RSS at the family-wise level
      ``final_alpha`` (Bonferroni over the richer candidates) with the effective sample count
      of the prefiltered, possibly coloured residual (``models.drivetrain.gp.selection``);
      each round of the stage then also refits the ``finalists.RICHER`` (2) richer
      structures with the lowest p. Measured (docs/drive.md, "The choice by the data's
      evidence"): on the recovery benchmark it moved two answers one inertia towards the
      truth and none wrongly; EMPS and its coloured residual (5.05 samples) do not move.
    - ``widen_prefilter`` (since 2026-12-07; the ``data`` preset's unless a cut-off is named):
      when the answer's residual fails Fisher's periodic test with its peak above the
      prefilter (``fit_evidence.wider_cutoff``), the search runs once more at the cut-off that
      shows it, and answers from there where that answer's residual passes the test, else
      with its first answer (``gp.widening``, ``StructureSearch.widened_``; methods §2.4).
    - ``init_max_nodes``: size of the random initial trees (uniform in 1..init_max_nodes);
      ``max_nodes`` bounds the growth by operators.
    """

    population: int = 6
    generations: int = 20
    p_clone: float = 0.5
    p_point: float = 0.2
    p_insertion: float = 0.2
    p_deletion: float = 0.2
    p_chromosome: float = 0.05
    k_p: float = 2.0
    n_elite: int = 1
    max_nodes: int = 6
    init_max_nodes: int = 5
    selection: str = "tournament"
    selection_pressure: float = 2.0
    tournament_size: int = 4
    structure_cache: bool = True
    avoid_duplicates: bool = True
    avoid_revisits: bool = True
    novelty_tries: int = 10
    simplify_best: bool = True
    refine_top: int = 2
    refine_at_once: bool = True
    breed_ahead: int = 1
    polish_rounds: int = 3
    final_top: int = 0
    final_rounds: int = 2
    final_alpha: float = 0.0
    widen_prefilter: bool = False
    test_fraction: float = 0.0
    f_tanh: float = DEFAULT_F_TANH
    nominals: tuple[tuple[str, float], ...] = ()
    bounds: tuple[tuple[str, tuple[float, float]], ...] = ()
    allowed: tuple[str, ...] = tuple(k.value for k in Submodel)
    identification: IdentificationSettings = field(default_factory=IdentificationSettings)

    def __post_init__(self) -> None:
        for name in ("p_clone", "p_point", "p_insertion", "p_deletion", "p_chromosome"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise InputError(f"{name} must be a probability in [0, 1], got {value!r}")
        if self.population < 2 or self.generations < 1:
            raise InputError("population must be >= 2 and generations >= 1")
        if not 0 <= self.n_elite < self.population:
            raise InputError("n_elite must be in [0, population)")
        if not 0.0 <= self.test_fraction < 0.9:
            raise InputError(f"test_fraction must be in [0, 0.9), got {self.test_fraction!r}")
        if self.max_nodes < 1 or self.k_p < 0:
            raise InputError("max_nodes must be >= 1 and k_p >= 0")
        if not 1 <= self.init_max_nodes <= self.max_nodes:
            raise InputError("init_max_nodes must be in [1, max_nodes]")
        if self.selection not in SELECTIONS:
            raise InputError(f"selection must be one of {SELECTIONS}, got {self.selection!r}")
        if not 1.0 <= self.selection_pressure <= 2.0 or self.tournament_size < 1:
            raise InputError("selection_pressure must be in [1, 2] and tournament_size >= 1")
        if min(self.novelty_tries, self.refine_top, self.polish_rounds, self.final_top,
               self.final_rounds) < 0:  # fmt: skip
            raise InputError("novelty_tries, refine_top, polish_rounds, final_top and "
                             "final_rounds must be >= 0")  # fmt: skip
        if self.breed_ahead < 0:
            raise InputError("breed_ahead must be >= 0")
        if not 0.0 <= self.final_alpha < 1.0:
            raise InputError(f"final_alpha must be in [0, 1), got {self.final_alpha!r}")
        kinds = [Submodel.parse(k) for k in self.allowed]
        if not any(k.n_masses for k in kinds):
            raise InputError("the allowed function set needs at least one multi-mass type")
        object.__setattr__(self, "allowed", tuple(k.value for k in kinds))
        if isinstance(self.nominals, Mapping):
            object.__setattr__(self, "nominals", tuple(sorted(self.nominals.items())))
        if isinstance(self.bounds, Mapping):
            items = sorted((k, tuple(v)) for k, v in self.bounds.items())
            object.__setattr__(self, "bounds", tuple(items))

    def specs(self, kind: Submodel | str) -> tuple[ParameterSpec, ...]:
        return parameter_specs(kind, dict(self.nominals), dict(self.bounds))

    def kit_options(self) -> dict:
        return {"f_tanh": self.f_tanh, "nominals": dict(self.nominals) or None,
                "bounds": dict(self.bounds) or None}  # fmt: skip

    def to_dict(self) -> dict:
        out = asdict(self)
        out["nominals"] = dict(self.nominals)
        out["bounds"] = {k: list(v) for k, v in self.bounds}
        out["allowed"] = list(self.allowed)
        return out
