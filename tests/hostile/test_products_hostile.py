"""Model products from untrusted places (issue 28, item 5): loading a model folder or a
registered version never runs code that came with it; greylab rebuilds the model from
`MLmodel` + `spec.json` with its own classes, a spec's plugin reference passes the flow
allow-list, a broken spec or a spec outside the folder is exit 2, a damaged store exit 1."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from flows.cli import main
from models import registry

MARKER_LINE = "\nopen({marker!r}, 'w').write('code from the model folder ran')\n"


@pytest.fixture(scope="module")
def product(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A press M3 product saved as greylab saves it, and a table from the twin to validate on."""
    from methods import correct_to_setpoints, fit_parameters
    from models.press import M3, simulate_press
    from products.pyfunc import press_spec, saved_pyfunc

    root = tmp_path_factory.mktemp("product")
    table, sheet = simulate_press("M3", seed=1)
    fit = fit_parameters(M3, correct_to_setpoints(table), sigma=sheet)
    q, sensors = M3.default_forces, list(M3.sensors)
    example = pd.DataFrame(
        {"step": np.repeat(np.arange(q.size), len(sensors)), "force_N": np.repeat(q, len(sensors)),
         "sensor": np.tile(np.array(sensors, dtype=object), q.size)}
    )  # fmt: skip
    spec = press_spec("M3", fit, all_sensors=sensors)
    with saved_pyfunc(spec, input_example=example, metadata={}) as folder:
        shutil.copytree(folder, root / "model")
    data = root / "new.csv"
    simulate_press("M3", seed=2)[0].to_csv(data, index=False)
    return {"root": root, "model": root / "model", "data": data, "spec": spec}


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GREYLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/m.db")
    monkeypatch.delenv(registry.ALLOWED_ENV, raising=False)
    monkeypatch.setattr(registry, "_SESSION_ALLOWED", set())
    return tmp_path


def _copy(product: dict[str, Any], where: Path) -> Path:
    folder = where / "copied-model"
    shutil.copytree(product["model"], folder)
    return folder


def _spec(folder: Path, **changes: Any) -> None:
    path = folder / "artifacts" / "spec.json"
    spec = json.loads(path.read_text())
    spec.update(changes)
    for key in [k for k, v in changes.items() if v is None]:
        spec.pop(key)
    path.write_text(json.dumps(spec))


def _validate(folder: Path, data: Path, *extra: str) -> int:
    return main(["press", "validate", "--model", str(folder), "--data", str(data), "--no-track",
                 "--json", *extra])  # fmt: skip


def test_code_added_to_the_model_folder_never_runs(product, home, capsys) -> None:
    folder = _copy(product, home)
    marker = home / "MARKER"
    for name in ("press_model.py", "python_env.yaml"):
        assert (folder / name).exists()
    with (folder / "press_model.py").open("a") as handle:
        handle.write(MARKER_LINE.format(marker=str(marker)))
    assert _validate(folder, product["data"]) == 0
    assert not marker.exists()
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "press" and set(out["metrics"]) == set(product["spec"]["sensors"])


def test_a_loader_module_named_in_mlmodel_is_never_imported(product, home, capsys) -> None:
    (home / "hostile_loader.py").write_text(f"open({str(home / 'MARKER')!r}, 'w')\n")
    folder = _copy(product, home)
    text = (folder / "MLmodel").read_text()
    (folder / "MLmodel").write_text(text.replace("mlflow.pyfunc.loaders.code_model",
                                                 "hostile_loader"))  # fmt: skip
    sys.path.insert(0, str(home))
    try:
        assert _validate(folder, product["data"]) == 0, capsys.readouterr().err
    finally:
        sys.path.remove(str(home))
        sys.modules.pop("hostile_loader", None)
    assert not (home / "MARKER").exists()


def test_a_spec_naming_code_is_refused_without_importing_it(product, home, capsys) -> None:
    folder = _copy(product, home)
    for reference in ("os:system", "hostile_spec_module:MODEL"):
        _spec(folder, model=reference)
        assert _validate(folder, product["data"]) == 2
        err = capsys.readouterr().err
        assert reference in err and "not allowed" in err and "--allow-model" in err
    assert "hostile_spec_module" not in sys.modules


def test_a_spec_plugin_the_user_allows_on_the_command_line_loads(
    product, home, monkeypatch, capsys
) -> None:
    (home / "spec_plugin_ok.py").write_text("from models.press import M3 as MODEL\n")
    monkeypatch.syspath_prepend(str(home))
    folder = _copy(product, home)
    _spec(folder, model="spec_plugin_ok:MODEL")
    try:
        assert _validate(folder, product["data"]) == 2
        assert "spec_plugin_ok" not in sys.modules  # refused before any import
        capsys.readouterr()
        assert _validate(folder, product["data"], "--allow-model", "spec_plugin_ok:MODEL") == 0
    finally:
        sys.modules.pop("spec_plugin_ok", None)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"kind": None}, "no field 'kind'"),
        ({"kind": "pickle"}, "kind 'pickle'"),
        ({"fit": {"parameters": {"k5": 1.0}, "covariance": [[1.0]], "sigma": "x"}}, "fit.sigma"),
        ({"fit": {"parameters": {"k5": 1e308}, "covariance": [[1, 2]], "sigma": {}}},
         "fit.covariance"),
        ({"fit": {"parameters": {"k5": 1.0}, "covariance": [[1.0]], "sigma": {}}}, "parameters"),
    ],
)  # fmt: skip
def test_a_broken_spec_is_exit_2_naming_the_field(product, home, capsys, change, words) -> None:
    folder = _copy(product, home)
    _spec(folder, **change)
    assert _validate(folder, product["data"]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_a_spec_outside_the_folder_is_refused(product, home, capsys) -> None:
    folder = _copy(product, home)
    outside = home / "elsewhere.json"
    outside.write_text(json.dumps(product["spec"]))
    text = (folder / "MLmodel").read_text().replace("path: artifacts/spec.json",
                                                    "path: ../elsewhere.json")  # fmt: skip
    (folder / "MLmodel").write_text(text)
    assert _validate(folder, product["data"]) == 2
    assert "not a file inside the folder" in capsys.readouterr().err


def test_yaml_tags_in_mlmodel_construct_nothing(product, home, capsys) -> None:
    folder = _copy(product, home)
    text = (folder / "MLmodel").read_text()
    (folder / "MLmodel").write_text("hostile: !!python/object/apply:os.system ['true']\n" + text)
    assert _validate(folder, product["data"]) == 2
    assert "not readable YAML" in capsys.readouterr().err


def test_an_oversized_mlmodel_is_refused_unread(product, home, capsys) -> None:
    folder = _copy(product, home)
    with (folder / "MLmodel").open("a") as handle:
        handle.write("# padding\n" * 300_000)
    assert _validate(folder, product["data"]) == 2
    assert "MLmodel has" in capsys.readouterr().err


def test_sensors_the_model_lacks_are_named_not_dropped_silently(product, home, capsys) -> None:
    table = pd.read_csv(product["data"])
    extra = table[table["sensor"] == "D_vertical"].assign(sensor="a[1]")
    data = home / "extra.csv"
    pd.concat([table, extra]).to_csv(data, index=False)
    assert _validate(product["model"], data) == 0
    captured = capsys.readouterr()
    warnings = json.loads(captured.out)["warnings"]
    assert len(warnings) == 1 and "'a[1]' (174 rows)" in warnings[0]
    assert main(["press", "validate", "--model", str(product["model"]), "--data", str(data),
                 "--no-track"]) == 0  # fmt: skip
    assert "warning:" in capsys.readouterr().err


def test_mlflow_still_loads_the_product_for_a_lab_that_trusts_it(product) -> None:
    import mlflow.pyfunc

    loaded = mlflow.pyfunc.load_model(str(product["model"]))
    out = loaded.predict(pd.DataFrame({"force_N": [1e4, 2e4]}))
    assert len(out) == 2 * len(product["spec"]["sensors"])


def test_a_damaged_store_is_an_infrastructure_failure(product, home, capsys) -> None:
    """A truncated mlflow.db is not the user's input: exit 1, not 2."""
    from runtime.settings import load_settings
    from tracking.mlflow_tracker import Tracker

    Tracker(load_settings()).ensure_store()
    db = home / "m.db"
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])
    code = main(["press", "validate", "--model", "models:/press-M3/1", "--data",
                 str(product["data"]), "--no-track"])  # fmt: skip
    assert code == 1, capsys.readouterr().err
