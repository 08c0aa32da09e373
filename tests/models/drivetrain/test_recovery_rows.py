"""``benchmarks/drive_recovery.py search --rows FILE.jsonl``: a row appended per machine, a
rerun with the same settings skips the machines already there (issue 26: a 30-machine run
spanning sessions)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import drive_recovery


@pytest.fixture(autouse=True)
def quick_machines(monkeypatch):
    """The machines drawn as the benchmark draws them, their simulation skipped (the noise
    still drawn from the same generator, so that the draws stay in step)."""
    monkeypatch.setattr(drive_recovery, "simulate_machine", lambda m: None)
    monkeypatch.setattr(drive_recovery, "add_noise", lambda rec, pct, rng: rng.normal(size=3))


def _fake(calls):
    def search_one(i, m, rec, args):
        calls.append(i)
        return {"machine": i, "kind": m.kind, "found": "one_mass", "relation": "other",
                "wall_s": 10.0 + i, "fitness": 1.0, "rss": 1.0, "d": 1,
                "truth_in_search": None}  # fmt: skip

    return search_one


def test_a_rerun_skips_the_machines_done_and_reports_them_all(tmp_path, monkeypatch, capsys):
    rows = tmp_path / "rows.jsonl"
    calls: list[int] = []
    monkeypatch.setattr(drive_recovery, "search_one", _fake(calls))
    argv = ["search", "--machines", "2", "--seed", "3", "--json", str(tmp_path / "b.json"),
            "--rows", str(rows)]  # fmt: skip
    drive_recovery.main(argv)
    assert calls == [0, 1] and len(rows.read_text().splitlines()) == 2
    # killed while writing a third row: the cut line is not reused; machine 2 searched anew
    with rows.open("a") as f:
        f.write('{"machine": 2, "kind": "cut sh')
    calls.clear()
    drive_recovery.main([*argv[:2], "3", *argv[3:]])
    assert calls == [2]
    out = capsys.readouterr().out
    assert all(f"# {i} " in out for i in range(3))  # the rows reused are reported too
    assert "11" in json.dumps(json.loads((tmp_path / "b.json").read_text()))  # median wall
    # other settings (another seed or gain mode): nothing reused
    calls.clear()
    drive_recovery.main([*argv, "--search-gain", "fixed"])
    assert calls == [0, 1]
    keys = {json.dumps(json.loads(line)["key"], sort_keys=True)
            for line in rows.read_text().splitlines() if line.startswith('{"machine": 0')}  # fmt: skip
    assert len(keys) == 2


@pytest.mark.parametrize("name", ["rows.json", "rows.txt"])
def test_a_plain_rows_file_is_written_whole_at_the_end(tmp_path, monkeypatch, name):
    calls: list[int] = []
    monkeypatch.setattr(drive_recovery, "search_one", _fake(calls))
    path = tmp_path / name
    for _ in range(2):
        drive_recovery.main(["search", "--machines", "1", "--json", str(tmp_path / "b.json"),
                             "--rows", str(path)])  # fmt: skip
    assert calls == [0, 0] and [r["machine"] for r in json.loads(path.read_text())] == [0]


def test_a_cut_short_or_foreign_line_is_not_reused_and_the_next_row_survives(tmp_path):
    """Hostile rows files: a last line cut short by a killed run, a row with other settings,
    JSON that is not a row. Only valid rows of these settings are reused, and the row appended
    after the cut line is a line of its own (not glued to the broken one)."""
    from types import SimpleNamespace

    from benchmarks._search_diagnosis import ROW_KEYS, append_row, done_rows

    args = SimpleNamespace(**{k: 0 for k in ROW_KEYS})
    other = SimpleNamespace(**{**vars(args), "seed": 1})
    path = str(tmp_path / "rows.jsonl")
    append_row(path, args, {"machine": 0, "found": "a"})
    append_row(path, other, {"machine": 1, "found": "b"})
    with open(path, "a", encoding="utf-8") as f:
        f.write('[1, 2]\n"text"\n{"machine": 2, "found": "c", "key": {"se')  # killed mid-write
    append_row(path, args, {"machine": 3, "found": "d"})
    assert {i: r["found"] for i, r in done_rows(path, args).items()} == {0: "a", 3: "d"}
    assert set(done_rows(path, other)) == {1}


def test_a_row_with_foreign_fields_is_classified_by_its_relation_and_printed():
    """Hostile rows: ``selection``, ``truth_in_search`` and ``dynamics`` of the wrong type (a
    hand-edited file) fall back to the relation alone and a line without the dynamics."""
    from benchmarks._search_diagnosis import dynamics_line, miss_kind

    row = {"relation": "simpler", "rss": 0.11, "d": 5, "fitness": 1.0}
    assert miss_kind(row | {"selection": "x", "truth_in_search": [1]}) == (
        "another structure (simpler)")  # fmt: skip
    assert miss_kind(row | {"selection": [], "truth_in_search": {"refined": True, "rss": 0.09,
                                                                 "fitness": 1.0}}) == (
        "another structure (simpler)")  # fmt: skip
    assert dynamics_line("<b>x</b>") == "" and dynamics_line(None) == ""
    assert dynamics_line({"modes_hz": [32.6]}) == "; truth's modes 32.6 Hz"


def test_coverage_counts_parameters_and_the_all_inside_rate_marginal_intervals_give():
    from benchmarks._recovery_checks import coverage

    rows = [{"param_errors": {f"p{i}": 0.01 for i in range(11)}, "outside": ["p3"]},
            {"param_errors": {"a": 0.0, "b": 0.0}, "outside": []},
            {"relation": "same", "outside": ["x"]}]  # an old row: no names, not counted  # fmt: skip
    share, expected, k = coverage(rows)
    assert k == 13 and share == pytest.approx(12 / 13)
    assert expected == pytest.approx((0.95**11 + 0.95**2) / 2)
    assert 0.56 < 0.95**11 < 0.57  # the docstring's figure
    assert all(v != v for v in coverage(rows[2:])[:2]) and coverage([])[2] == 0


def test_a_search_row_keeps_the_final_stages_fits_and_short_fits():
    """``search_facts``: the evidence's moves and short fits (``screened``) and the final
    stage's fits, compact, so a rule skipping hopeless refits can be tuned on the rows."""
    from types import SimpleNamespace

    import pandas as pd

    from benchmarks._drive_machines import draw_machine
    from benchmarks._search_diagnosis import search_facts

    m = draw_machine(np.random.default_rng(0), 0)
    screened = [{"call": 1, "names": "one_mass,gravity", "rss": 0.5, "n_params": 2}]
    final = pd.DataFrame([{"round": 1, "codes": "1,8", "names": "one_mass,gravity", "fitness": 2.0,
                           "rss": 0.4, "n_params": 2, "n_sub": 1, "wall_s": 3.0, "chosen": True,
                           "f_tanh": 10.0, "gain_estimated": False}])  # fmt: skip
    search = SimpleNamespace(_cache={}, final_=final, selection_={
        "n_eff": 149.9, "m": 3, "alpha": 0.01, "moves": [], "screened": screened, "other": 1})  # fmt: skip
    row = search_facts(search, m)
    assert row["selection"] == {"n_eff": 149.9, "m": 3, "alpha": 0.01, "moves": [],
                                "screened": screened}  # fmt: skip
    assert row["final"] == [{"round": 1, "names": "one_mass,gravity", "rss": 0.4, "n_params": 2,
                             "wall_s": 3.0, "gain_estimated": False, "chosen": True}]  # fmt: skip
    back = json.loads(json.dumps(row, default=str))["final"][0]
    assert back["rss"] == 0.4 and back["gain_estimated"] is False  # (native types, not "False")
    assert search_facts(SimpleNamespace(_cache={}), m)["final"] == []


def test_the_residual_figures_count_told_answers_and_a_line_says_the_tests(capsys):
    """``residual_figures``: of the exact answers the share whose residual tests pass, of the
    misses the share whose tests fail (the evidence flags them); rows without a word (older,
    exact fits, hand-edited values) are left out; ``show_search`` says pass, fail or n/a."""
    from benchmarks._recovery_checks import residual_figures
    from benchmarks._search_diagnosis import show_search

    class Figures:
        def __init__(self):
            self.got = {}

        def add(self, name, value, label, **kw):
            self.got[name] = (value, label)

    same, other = {"relation": "same"}, {"relation": "simpler"}
    rows = (
        [same | {"residuals_passed": v} for v in (True, True, False, None)]
        + [other | {"residuals_passed": v} for v in (False, True, None, "x", [1])]
        + [other]
    )
    bench = Figures()
    residual_figures(bench, rows)
    assert bench.got["white_exact"][0] == pytest.approx(200 / 3)
    assert "(3 with them)" in bench.got["white_exact"][1]
    assert bench.got["flagged"] == (50.0, bench.got["flagged"][1])
    assert "(2 with them)" in bench.got["flagged"][1]
    residual_figures(bench, [])  # no rows: 0 %, not a division by zero
    assert bench.got["flagged"][0] == 0.0
    line = {"machine": 1, "kind": "one_mass", "found": "one_mass", "relation": "same",
            "fitness": 1.0, "rss": 1.0, "d": 1, "wall_s": 1.0, "truth_in_search": None}  # fmt: skip
    for value, word in ((True, "residual tests pass"), (False, "residual tests fail"),
                        (None, "residual tests n/a"), ([1], None)):  # fmt: skip
        show_search(line | {"residuals_passed": value}, 0.5)
        out = capsys.readouterr().out
        assert (word in out) if word else "residual tests" not in out
    show_search(line | {"timed_out": ["two_mass", "two_mass"]}, 0.5)
    assert "; 2 identifications stopped at their time limit (1 s" in capsys.readouterr().out
    show_search(line | {"timed_out": 5}, 0.5)  # hand-edited: not a list, nothing said
    assert "time limit" not in capsys.readouterr().out
    show_search(line | {"residuals_passed": False,
                        "periodic": {"frequency_hz": 52.6, "p_value": 6e-11}}, 0.5)  # fmt: skip
    assert "residual tests fail (periodic peak 52.6 Hz, p 6e-11)" in capsys.readouterr().out
    for periodic in ({"frequency_hz": "<b>"}, None, "x"):  # hand-edited or none: the word alone
        show_search(line | {"residuals_passed": False, "periodic": periodic}, 0.5)
        out = capsys.readouterr().out
        assert "residual tests fail" in out and "periodic" not in out


def test_a_row_keeps_the_answers_parameters_and_its_residual_tests():
    """``answer_facts``: every row (not only exact ones) keeps the answer's parameters and
    whether its residual tests pass, for the search's answer at its own gain."""
    from types import SimpleNamespace

    from benchmarks._search_diagnosis import answer_facts
    from models.drivetrain import reference_recording
    from models.drivetrain.gp import GPSettings, IndividualSpec, as_arrays, identify

    truth = {"J1": 0.012, "M_C": 0.18, "f_v": 0.011}
    rec = reference_recording("1,5,6", overrides=truth, noise=0.42, seed=2)
    settings = GPSettings()
    for structure, passed in ((("one_mass", "coulomb", "viscous"), True),
                              (("one_mass", "viscous"), False)):  # fmt: skip
        start = tuple(sorted((k, v) for k, v in truth.items() if k != "M_C" or len(structure) > 2))
        ev = identify(IndividualSpec(structure, start), as_arrays(rec), settings)
        search = SimpleNamespace(best_evaluation_=ev, best_parameters_=ev.parameters,
                                 settings=settings)  # fmt: skip
        facts = answer_facts(search, rec)
        assert facts["answer_parameters"] == dict(ev.parameters)
        assert facts["residuals_passed"] is passed
        assert facts["periodic"]["bins"] == (rec.shape[0] - 1) // 2  # Fisher's test, whole record


def test_the_benchmarks_prefilter_option_refuses_what_is_not_a_cut_off():
    """``--prefilter``: default, spectrum or a cut-off in Hz > 0; anything else is named."""
    import argparse

    from benchmarks._drive_machines import prefilter_arg

    assert [prefilter_arg(v) for v in ("default", "spectrum", "110")] == ["default", "spectrum",
                                                                          "110"]  # fmt: skip
    for bad in ("x", "0", "-5", "nan", "inf", "<b>", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="--prefilter must be"):
            prefilter_arg(bad)


def test_only_takes_machine_numbers_below_machines(capsys) -> None:
    """``--only 5,7``: machine numbers >= 0 below ``--machines``; anything else is named."""
    import argparse

    from benchmarks import drive_recovery
    from benchmarks._drive_machines import machine_list

    assert machine_list("5,7") == {5, 7} and machine_list("0") == {0}
    for bad in ("x", "-1", "5,,7", "<b>", "", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError, match="--only must list"):
            machine_list(bad)
    with pytest.raises(SystemExit) as refused:
        drive_recovery.main(["search", "--machines", "8", "--only", "3,9"])
    assert refused.value.code == 2 and "--only 9: not among the 8" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:
        drive_recovery.main(["single", "--machines", "8", "--only", "3"])
    assert refused.value.code == 2 and "--only is for search" in capsys.readouterr().err
