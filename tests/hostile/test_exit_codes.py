"""Exit codes as the README states (issue 28, items 8-10): user-caused errors exit 2 with one
paragraph naming the option/file/field, never "internal error"; names from lab content reach
MLflow as valid keys with the original kept."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from flows.cli import main
from models import registry

PLUGINS = {
    "raises_at_import": "raise RuntimeError('licence server unreachable\\nsecond line')\n",
    "syntax_error": "class Broken(:\n    pass\n",
    "raises_in_init": (
        "class Model:\n    name = 'x'\n    sensors = ('a',)\n    parameters = {'k': 1.0}\n"
        "    def __init__(self):\n        raise ValueError('calibration file missing')\n"
        "    def response(self, p, forces):\n        return forces\n"
    ),
}


@pytest.fixture()
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "plugins"
    folder.mkdir()
    for name, code in PLUGINS.items():
        (folder / f"exitcode_{name}.py").write_text(code)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delenv(registry.ALLOWED_ENV, raising=False)
    monkeypatch.setattr(registry, "_SESSION_ALLOWED", set())
    yield folder
    for name in PLUGINS:
        sys.modules.pop(f"exitcode_{name}", None)


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/m.db")
    return tmp_path


@pytest.mark.parametrize(
    ("reference", "words"),
    [
        ("exitcode_raises_at_import:Model", "RuntimeError: licence server unreachable"),
        ("exitcode_syntax_error:Broken", "SyntaxError: "),
        ("exitcode_raises_in_init:Model", "ValueError: calibration file missing"),
    ],
)
def test_a_failing_plugin_is_exit_2_naming_it(plugins, capsys, reference, words) -> None:
    assert main(["press", "design", "--model", reference]) == 2
    err = capsys.readouterr().err
    assert reference in err and words in err
    assert "internal error" not in err and "second line" not in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["press", "simulate", "--out", "x.csv", "--seed", "-1"],
        ["press", "simulate", "--out", "x.csv", "--series", "-3"],
        ["press", "simulate", "--out", "x.csv", "--series", "0"],
        ["press", "simulate", "--out", "x.csv", "--series", "1001"],
        ["compare", "--study", "press", "--last", "-2"],
        ["compare", "--models", "--last", "0"],
    ],
)
def test_out_of_range_numbers_are_usage_errors(argv, home, monkeypatch, capsys) -> None:
    monkeypatch.chdir(home)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert argv[-2] in err and "internal error" not in err
    assert not (home / "x.csv").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["press", "check", "--data", "{long}.csv"],
        ["press", "simulate", "--out", "{long}.csv"],
        ["press", "design", "--figure", "{long}.png"],
        ["drive", "simulate", "--out", "{long}.csv"],
    ],
)
def test_a_5000_character_path_is_exit_2(argv, home, monkeypatch, capsys) -> None:
    monkeypatch.chdir(home)
    long = "a" * 5000
    assert main([a.format(long=long) for a in argv]) == 2
    err = capsys.readouterr().err
    assert "too long" in err and "internal error" not in err and len(err) < 1500


@pytest.mark.parametrize(
    ("column", "value"),
    [("displacement_um", 1e308), ("displacement_um", -2e9), ("force_N", 1e13),
     ("force_setpoint_N", 1e300)],
)  # fmt: skip
def test_implausible_magnitudes_are_refused_by_the_press_schema(
    home, capsys, column, value
) -> None:
    from models.press import simulate_press

    table = simulate_press("M3", seed=1)[0]
    table.loc[7, column] = value
    data = home / "huge.csv"
    table.to_csv(data, index=False)
    assert main(["press", "check", "--data", str(data)]) == 2
    err = capsys.readouterr().err
    assert column in err and "internal error" not in err


def test_sensor_names_become_valid_mlflow_keys_with_the_original_kept(home) -> None:
    """`press detect` ended with "Invalid value normality.p.[...]" for a sensor `a[1]`."""
    from methods import check_normality
    from models.press import simulate_press
    from runtime.settings import load_settings
    from tasks.press.records import PressRecorder
    from tracking.mlflow_tracker import Tracker

    table = simulate_press("M3", seed=1)[0]
    names = {"D_vertical": "a[1]", "F_horizontal": "../b//c", "B0_vertical": "x" * 300}
    table["sensor"] = table["sensor"].map(names)
    tracker = Tracker(load_settings())
    recorder = PressRecorder("exit-codes", tracker)
    with recorder.session({"sensors": ",".join(names.values())}) as run_id:
        recorder.normality(check_normality(table))
        recorder.run.params({"sigma.a[1]": 0.5})
        recorder.run.series("alpha_min.a[1]", [0.1, 0.2])
    run = tracker.client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.metrics["normality.p.a_1_"] >= 0 and run.data.params["sigma.a_1_"] == "0.5"
    assert run.data.tags["greylab.key.normality.p.a_1_"] == "normality.p.a[1]"
    assert run.data.tags["greylab.key.alpha_min.a_1_"] == "alpha_min.a[1]"
    originals = {v for k, v in run.data.tags.items() if k.startswith("greylab.key.")}
    assert {f"normality.p.{n}" for n in names.values()} <= originals
    assert all(len(k) <= 250 for k in run.data.metrics)


def test_validation_tags_of_odd_sensor_names_are_valid(home) -> None:
    """Registered versions are tagged `validation.<output>.<metric>`: sanitised too."""
    from mlflow.utils.validation import _validate_tag_name

    from tracking.protocol import mlflow_key

    for output in ("a[1]", "/etc", "..", "ä ö", "x" * 400):
        _validate_tag_name(mlflow_key(f"validation.{output}.rmse"))
    assert mlflow_key("validation.a[1].rmse") == "validation.a_1_.rmse"
