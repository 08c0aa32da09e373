"""The cross-run cache key covers everything a press result depends on (tasks/cache.py)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from models import plugin_code
from models.plugin_code import model_fingerprint
from tasks import cache
from tasks.cache import CacheUse, StudyCache, source_tree_hash

ROOT = Path(__file__).resolve().parents[2]
CTX = SimpleNamespace(task=SimpleNamespace(source_code="def step(path, model): ..."))
POLICY = StudyCache(tables=("path",), models=("model",))

PLUGIN = """\
SCALE = {scale}


class Spring:
    name = "spring"
    sensors = ("a",)
    parameters = {{"k": 100.0}}

    def response(self, p, forces):
        return SCALE * forces / p[0]


spring = Spring()
"""


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "springcache.py").write_text(PLUGIN.format(scale=1))
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    sys.modules.pop("springcache", None)


def _key(path: Path, model: str = "M3", **others: object) -> str | None:
    inputs = {"path": str(path), "model": model, "sigma": None, **others}
    return POLICY.compute_key(CTX, inputs, {})


def test_same_inputs_same_key(tmp_path: Path) -> None:
    table = tmp_path / "t.parquet"
    table.write_bytes(b"rows")
    assert _key(table) == _key(table)
    assert _key(table) != _key(table, sensors=["a"])  # ordinary inputs still count


def test_overwriting_a_table_in_place_changes_the_key(tmp_path: Path) -> None:
    table = tmp_path / "t.parquet"
    table.write_bytes(b"first contents")
    before = _key(table)
    table.write_bytes(b"other contents")  # same path, same size class
    assert _key(table) != before


def test_same_contents_under_another_name_share_the_key(tmp_path: Path) -> None:
    (tmp_path / "a.parquet").write_bytes(b"rows")
    (tmp_path / "b.parquet").write_bytes(b"rows")
    assert _key(tmp_path / "a.parquet") == _key(tmp_path / "b.parquet")


def test_missing_table_is_not_cached(tmp_path: Path) -> None:
    assert _key(tmp_path / "gone.parquet") is None


def test_editing_a_plugin_model_changes_the_key(tmp_path: Path, plugin_dir: Path) -> None:
    table = tmp_path / "t.parquet"
    table.write_bytes(b"rows")
    before = _key(table, model="springcache:spring")
    (plugin_dir / "springcache.py").write_text(PLUGIN.format(scale=2))
    assert _key(table, model="springcache:spring") != before
    assert model_fingerprint("springcache:spring") is not None


def test_plugin_in_a_package_is_hashed_with_its_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "labmodels"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "spring.py").write_text("from labmodels.constants import SCALE\n")
    (package / "constants.py").write_text("SCALE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        before = model_fingerprint("labmodels.spring:spring")
        (package / "constants.py").write_text("SCALE = 2\n")  # a helper module, not the named one
        assert model_fingerprint("labmodels.spring:spring") != before
    finally:
        for name in ("labmodels", "labmodels.spring", "labmodels.constants"):
            sys.modules.pop(name, None)


def test_unknown_plugin_module_is_not_cached(tmp_path: Path) -> None:
    table = tmp_path / "t.parquet"
    table.write_bytes(b"rows")
    assert _key(table, model="no_such_module_xyz:model") is None


def test_changing_a_file_under_methods_changes_the_code_hash(tmp_path: Path) -> None:
    for package in cache.NUMERICS:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("*.pyc"))
    assert source_tree_hash(tmp_path) == source_tree_hash(ROOT)  # a faithful copy
    core = tmp_path / "methods" / "press" / "lsq" / "core.py"
    core.write_text(core.read_text() + "\n# a fix\n")
    assert source_tree_hash(tmp_path) != source_tree_hash(ROOT)


def test_code_fingerprint_enters_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = tmp_path / "t.parquet"
    table.write_bytes(b"rows")
    before = _key(table)
    monkeypatch.setattr(cache, "code_fingerprint", lambda: "9.9+upgraded")
    assert _key(table) != before


def test_fresh_model_module_reimports_an_edited_plugin(plugin_dir: Path) -> None:
    from models.registry import resolve_model

    plugin_code.fresh_model_module("springcache:spring")
    assert resolve_model("springcache:spring").response([2.0], 4.0) == 2.0
    (plugin_dir / "springcache.py").write_text(PLUGIN.format(scale=3))  # same size, same second
    plugin_code.fresh_model_module("springcache:spring")
    assert resolve_model("springcache:spring").response([2.0], 4.0) == 6.0


def test_cache_use_reports_hits() -> None:
    use = CacheUse()
    assert use.status == "miss"
    use.record("fit M1", SimpleNamespace(name="Cached"))
    use.record("fit M2", SimpleNamespace(name="Completed"))
    assert use.to_dict() == {"status": "partial", "cached": ["fit M1"], "computed": ["fit M2"]}
    assert use.tags() == {"greylab.cache": "partial", "greylab.cached_steps": "fit M1"}
    hit = CacheUse()
    hit.record("fit M1", SimpleNamespace(name="Cached"))
    assert hit.status == "hit"


def test_clear_cache_empties_the_folder(tmp_path: Path) -> None:
    folder = cache.ensure_cache_dir(tmp_path / "cache")
    (folder / ("a" * 32)).write_bytes(b"12345")
    assert cache.clear_cache(folder) == {
        "cache_dir": str(folder),
        "files_removed": 1,
        "bytes_removed": 5,
        "files_kept": 0,
    }
    assert folder.is_dir() and [p.name for p in folder.iterdir()] == [cache.MARKER]
    assert cache.clear_cache(folder)["files_removed"] == 0
    assert cache.clear_cache(tmp_path / "never-made")["files_removed"] == 0


def test_two_attributes_of_one_module_do_not_force_reimports(
    plugin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    from models.registry import resolve_model

    (plugin_dir / "springcache.py").write_text(PLUGIN.format(scale=1) + "other = Spring()\n")
    plugin_code.fresh_model_module("springcache:spring")
    resolve_model("springcache:spring")
    reloads: list[str] = []
    real_reload = importlib.reload
    monkeypatch.setattr(importlib, "reload", lambda m: reloads.append(m.__name__) or real_reload(m))
    # same file, same code: nothing to re-import
    plugin_code.fresh_model_module("springcache:other")
    plugin_code.fresh_model_module("springcache:spring")
    assert reloads == []


@pytest.mark.parametrize("raw", ["abc", "-1", "0", "nan", "1e999x"])
def test_cache_expiry_setting_is_checked(raw: str) -> None:
    from methods.errors import InputError
    from runtime.settings import load_settings

    with pytest.raises(InputError, match="GREYLAB_CACHE_DAYS"):
        load_settings({"GREYLAB_CACHE_DAYS": raw})
    assert load_settings({"GREYLAB_CACHE_DAYS": "2.5"}).cache_days == 2.5
