"""Identifications stopped at their time limit are recorded and told (issue 26, item "the
time-limit nondeterminism"): ``StructureSearch.timed_out_`` / ``StructureFit.timed_out_``,
``to_dict()["timed_out"]``, and a note among the evidence's (``fit_evidence.time_limit_note``).
A limit that binds makes the answer depend on the machine's load; the user is told which
structures it stopped, instead of a silently different answer on the next run."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from methods.errors import InputError
from models.drivetrain import reference_recording
from models.drivetrain.fit_evidence import time_limit_note
from models.drivetrain.gp import GPSettings, StructureSearch
from models.drivetrain.gp.evaluate import Evaluation, IndividualSpec, identify
from models.drivetrain.gp.recording import as_arrays
from models.drivetrain.gp.settings import IdentificationSettings
from models.drivetrain.kit import assemble
from models.drivetrain.search_evidence import search_evidence
from models.drivetrain.submodels import parse_structure

REC = reference_recording(duration=2.0)


def _search(time_limit_s: float) -> StructureSearch:
    ident = IdentificationSettings(time_limit_s=time_limit_s, jit=False)
    return StructureSearch(4, 2, 0, settings=GPSettings(identification=ident)).fit(REC)


@pytest.fixture(scope="module")
def free() -> StructureSearch:
    """The search with the default limit (120 s per identification)."""
    return _search(IdentificationSettings().time_limit_s)


def test_a_search_lists_the_identifications_its_time_limit_stopped(
    free: StructureSearch,
) -> None:
    """A limit of 50 ms stops identifications (measured: 28 of 30 on this search); each is
    listed once per stop by its structure, in the result's JSON and in one evidence note that
    counts them all and names the limit; the same search with the default limit lists none
    and says nothing."""
    stopped = _search(0.05)
    assert stopped.timed_out_, "a 50 ms limit stopped no identification"
    assert len(stopped.timed_out_) <= stopped.n_evaluations_
    for names in stopped.timed_out_:
        parse_structure(names.split("+"))  # a structure of known submodels, nothing else
    assert stopped.to_dict()["timed_out"] == stopped.timed_out_
    notes = search_evidence(stopped, REC, rivals=False).notes
    (note,) = [n for n in notes if "time limit" in n]
    assert note.startswith(f"{len(stopped.timed_out_)} identification")
    assert "(0.05 s;" in note and "may differ between runs of the same seed" in note

    assert free.timed_out_ == [] and free.to_dict()["timed_out"] == []
    assert not any("time limit" in n for n in search_evidence(free, REC, rivals=False).notes)


def test_the_note_counts_each_stop_and_names_at_most_four_structures(
    free: StructureSearch,
) -> None:
    evidence = search_evidence(free, REC, rivals=False)
    assert time_limit_note(evidence, [], 120.0) is evidence
    one = time_limit_note(evidence, ["two_mass+coulomb"], 120.0).notes[-1]
    assert one.startswith("1 identification stopped at the time limit (120 s; two_mass+coulomb)")
    many = ["one_mass", "two_mass", "three_mass", "four_mass", "two_mass+delay", "one_mass"]
    note = time_limit_note(evidence, many, 600.0).notes[-1]
    assert note.startswith("6 identifications stopped at the time limit (600 s; ")
    assert "and 1 more)" in note  # 5 distinct structures: 4 named
    assert time_limit_note(evidence, many, 600.0).notes[:-1] == evidence.notes
    rivals = time_limit_note(evidence, ["one_mass"], 600.0, "the rivals' fits: ").notes[-1]
    assert rivals.startswith("the rivals' fits: 1 identification stopped at the time limit")
    assert rivals.endswith("so their rows may differ between runs of the same seed")
    work = time_limit_note(evidence, ["one_mass"], 120.0, work_limit=3e9).notes[-1]
    assert work.startswith("1 identification stopped at the work or time limit (3e+09 state "
                           "updates or 120 s; one_mass)")  # fmt: skip
    assert "the work limit falls at the same point on any machine" in work


def test_a_named_fit_has_five_times_a_searchs_work_limit() -> None:
    """``structure_fit.continued``: as its 600 s are 5x a search's 120 s; none stays none."""
    from models.drivetrain.structure_fit import CONTINUATION_WORK, continued

    ident = IdentificationSettings(work_limit=2e9)
    assert CONTINUATION_WORK == 5.0
    got = continued(GPSettings(identification=ident)).identification
    assert got.work_limit == 1e10 and got.time_limit_s == 600.0
    assert continued(GPSettings()).identification.work_limit == 0.0


def test_a_named_structures_fit_tells_its_stops_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """``drive fit --structure``: the fit's own limit (600 s, ``structure_fit.CONTINUATION``)
    lowered to 50 ms here (a real 600 s stop would take 10 minutes)."""
    from models.drivetrain import structure_fit

    monkeypatch.setitem(structure_fit.CONTINUATION, "time_limit_s", 0.05)
    gp = replace(GPSettings(), identification=IdentificationSettings(jit=False))
    fit = structure_fit.StructureFit("two_mass,coulomb,viscous,stribeck", settings=gp,
                                     n_starts=2, rivals=False).fit(REC)  # fmt: skip
    assert fit.timed_out_ and set(fit.timed_out_) == {"two_mass+coulomb+viscous+stribeck"}
    assert fit.evidence_.notes[-1].startswith(f"{len(fit.timed_out_)} identification")
    assert "(0.05 s;" in fit.evidence_.notes[-1]
    assert fit.to_dict()["timed_out"] == fit.timed_out_


def test_a_resumed_search_lists_the_stops_of_the_generations_it_restored(tmp_path) -> None:
    """A search stopped after its first generation and resumed from the checkpoint: the
    stops of the restored generation (its evaluations, read back with ``timed_out``) are
    listed too, not only those after the resume."""
    ident = IdentificationSettings(time_limit_s=0.05, jit=False)
    settings = GPSettings(identification=ident)

    def stop_after_first(g: int, _n: int, _best) -> None:
        raise KeyboardInterrupt

    first = StructureSearch(4, 2, 0, settings=settings, checkpoint_dir=tmp_path,
                            progress=stop_after_first)  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        first.fit(REC)
    before = ["+".join(ev.structure) for ev in first._cache.values() if ev.timed_out]
    assert before, "a 50 ms limit stopped nothing in the first generation"
    resumed = StructureSearch(4, 2, 0, settings=settings, checkpoint_dir=tmp_path).fit(REC)
    assert resumed.resumed_from_ == 1
    assert set(before) <= set(resumed.timed_out_)


def test_a_fit_over_the_friction_gain_counts_every_gains_stop(monkeypatch) -> None:
    """The friction gain's profile (``drive fit --friction-gain profile``, the final stage's
    fits over the gain): a stop at any gain is recorded (the gain each fit chose depends on
    all of them), not only the chosen gain's."""
    from models.drivetrain import structure_fit
    from models.drivetrain.gp.evaluate import IndividualSpec
    from models.drivetrain.gp.final_gain import identify_over_gain
    from models.drivetrain.gp.recording import as_arrays

    monkeypatch.setitem(structure_fit.CONTINUATION, "time_limit_s", 0.05)
    gp = replace(GPSettings(), identification=IdentificationSettings(jit=False))
    fit = structure_fit.StructureFit("two_mass,coulomb,viscous,stribeck", settings=gp,
                                     n_starts=1, rivals=False, friction_gain="profile").fit(REC)  # fmt: skip
    stopped = fit.gain_profile_.timed_out
    assert stopped and set(stopped) <= {g for g, _rss in fit.gain_profile_.profile}
    assert len(fit.timed_out_) >= len(stopped)
    quick = replace(gp, identification=IdentificationSettings(jit=False, time_limit_s=0.05))
    structure = ("two_mass", "coulomb", "viscous", "stribeck")
    start = tuple(sorted((s.name, s.nominal) for k in structure for s in quick.specs(k)))
    ev = identify_over_gain(IndividualSpec(structure, start), as_arrays(REC), quick)
    assert ev.timed_out is True


@pytest.mark.parametrize("kept", [True, False])
def test_a_widened_search_lists_both_searches_stops(monkeypatch, kept: bool) -> None:
    """``widening.search_again``: the second search's stops are added to the first's whether
    its answer stands or not (as ``n_evaluations_`` counts both); a second search that fails
    leaves the first answer whole, its stops too. The widening itself is stubbed (its own
    tests run it for real): ``wider`` asks for a second search, ``judged`` decides."""
    from models.drivetrain.gp import widening

    seen: dict[str, list[str]] = {}

    def wider(search, preset, _data):
        seen["first"] = list(search.timed_out_)
        record = {"periodic": {"frequency_hz": 50.0}, "first_evaluations": search.n_evaluations_}
        return preset, record

    def judged(search, _data, record):
        seen["second"] = list(search.timed_out_)
        return record | {"kept": kept, "second_evaluations": search.n_evaluations_}

    monkeypatch.setattr(widening, "wider", wider)
    monkeypatch.setattr(widening, "judged", judged)
    search = _search(0.05)
    assert seen["first"] and seen["second"]  # a 50 ms limit stops some in each
    assert search.timed_out_ == seen["first"] + seen["second"]
    assert search.widened_["kept"] is kept

    def failing(search, _data, record):
        raise RuntimeError("the second search failed")

    monkeypatch.setattr(widening, "judged", failing)
    ident = IdentificationSettings(time_limit_s=0.05, jit=False)
    again = StructureSearch(4, 2, 0, settings=GPSettings(identification=ident))
    with pytest.raises(RuntimeError, match="second search failed"):
        again.fit(REC)
    assert again.timed_out_ == seen["first"] and again.widened_ is None


def test_the_emps_benchmark_refuses_a_negative_costliest_count() -> None:
    """``drive_search.py --costliest N`` lists the N costliest identifications: a negative N
    (which a slice would read as "all but the last") is refused by name before any work."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "benchmarks/drive_search.py", "emps", "--costliest",
                          "-1"], cwd=root, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 2 and "--costliest -1" in out.stderr


def _work_limited(work_limit: float) -> Evaluation:
    """The reference's true structure identified in full with ``work_limit`` and no binding
    wall clock."""
    ident = IdentificationSettings(jit=False, screen_nfev=0, work_limit=work_limit)
    spec = IndividualSpec(("two_mass", "coulomb", "viscous"), (), refine=True)
    return identify(spec, as_arrays(REC), GPSettings(identification=ident))


def test_a_work_limit_stops_a_fit_at_the_same_point_whatever_the_load(monkeypatch) -> None:
    """``work_limit``: the fit stops once its simulations' state updates pass the limit (a
    Jacobian ``1 + n_p`` simulations), not by the clock: with every simulation slowed by 20 ms
    (a loaded machine, injected) it stops after the same simulations at the same point, says
    which limit stopped it, and counts as a stop (``timed_out``) like the wall clock's."""
    from models.drivetrain.simulate import CompiledSimulator, simulation_cost

    data = as_arrays(REC)
    one = simulation_cost(assemble(("two_mass", "coulomb", "viscous")), data.n, data.dt, 1).work
    quick = _work_limited(12 * one)
    assert quick.timed_out and "work limit" in quick.message
    assert _work_limited(0.0).nfev > quick.nfev  # (0: off)
    slowed = []
    for name in ("simulate", "simulate_with_jacobian"):
        real = getattr(CompiledSimulator, name)

        def slow(self, *args, _real=real, **kwargs):
            slowed.append(time.sleep(0.02))
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(CompiledSimulator, name, slow)
    loaded = _work_limited(12 * one)
    assert len(slowed) >= loaded.nfev > 0
    assert (loaded.nfev, loaded.parameters, loaded.rss) == (quick.nfev, quick.parameters, quick.rss)
    assert loaded.timed_out and loaded.message == quick.message


@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan")])
def test_a_work_limit_must_be_finite_and_not_negative(bad: float) -> None:
    with pytest.raises(InputError, match="work_limit"):
        IdentificationSettings(work_limit=bad)
