"""Stores copied from a template into a fresh home (`runtime.store_templates`, issue 31).

The oracle: a store copied from the template is the store a fresh creation makes (same schema,
same rows but the creation times, MLflow's `Default` experiment where MLflow puts it for the
working folder of the copy); and a template is never used unless it is whole, ours and in a
folder no one else can write, nor copied over a store that exists.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime import store_templates
from runtime.settings import load_settings
from runtime.stores import tracking_client

ROOT = Path(__file__).resolve().parents[1]


def _dump(db: Path) -> list[str]:
    with sqlite3.connect(db) as con:
        return sorted(con.iterdump())


def _fake_store(path: Path, rows: int = 1, migrated: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as con:
        if migrated:
            con.execute("create table alembic_version (version_num)")
            con.execute("insert into alembic_version values ('head')")
        con.execute("create table t (x)")
        con.executemany("insert into t values (?)", [(i,) for i in range(rows)])
    con.close()


@pytest.fixture
def templates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "templates"
    monkeypatch.setenv(store_templates.ENV, str(folder))
    return folder


def _spy_seed(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    seen: list[bool] = []
    real = store_templates.seed

    def seed(*args: Any) -> bool:
        seen.append(real(*args))
        return seen[-1]

    monkeypatch.setattr(store_templates, "seed", seed)
    return seen


def test_an_mlflow_store_from_the_template_is_the_store_mlflow_creates(
    tmp_path: Path, templates: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _spy_seed(monkeypatch)
    first_lab, second_lab = tmp_path / "lab1", tmp_path / "lab2"
    for lab in (first_lab, second_lab):
        lab.mkdir()
    monkeypatch.chdir(first_lab)
    tracking_client(load_settings({"GREYLAB_HOME": str(tmp_path / "h1")}))
    assert seen == [False] and len(list(templates.glob("mlflow-*.db"))) == 1
    monkeypatch.chdir(second_lab)
    tracking_client(load_settings({"GREYLAB_HOME": str(tmp_path / "h2")}))
    assert seen == [False, True]

    def rows(db: Path, lab: Path) -> list[str]:
        with sqlite3.connect(db) as con:
            default = con.execute(
                "select artifact_location, creation_time, last_update_time from experiments "
                "where experiment_id = 0"
            ).fetchone()
        assert default[0] == str(lab / "mlruns" / "0")  # where MLflow puts it for this folder
        assert default[1] == default[2] > 0
        text = [line.replace(str(lab), "LAB").replace(str(default[1]), "T") for line in _dump(db)]
        return text

    made, copied = (
        rows(tmp_path / "h1" / "mlflow.db", first_lab),
        rows(tmp_path / "h2" / "mlflow.db", second_lab),
    )
    assert copied == made
    with sqlite3.connect(tmp_path / "h2" / "mlflow.db") as con:
        assert con.execute("pragma journal_mode").fetchone()[0] == "wal"
        assert con.execute("pragma integrity_check").fetchone()[0] == "ok"
    assert not list(templates.glob(".*")), "no temporary file left beside the template"


def _migrate(prefect_home: Path, templates: Path) -> None:
    env = {**os.environ, "PREFECT_HOME": str(prefect_home), store_templates.ENV: str(templates),
           "PYTHONPATH": str(ROOT)}  # fmt: skip
    env.pop("PREFECT_API_DATABASE_CONNECTION_URL", None)
    code = "from runtime.server_guard import migrate_prefect_database; migrate_prefect_database()"
    prefect_home.mkdir(parents=True)
    subprocess.run([sys.executable, "-P", "-c", code], env=env, check=True, timeout=300,
                   cwd=prefect_home, capture_output=True)  # fmt: skip


@pytest.mark.slow
def test_a_prefect_database_from_the_template_is_the_migrated_one(tmp_path: Path) -> None:
    templates = tmp_path / "templates"
    _migrate(tmp_path / "p1", templates)
    (template,) = templates.glob("prefect-*.db")
    _migrate(tmp_path / "p2", templates)
    made, copied = tmp_path / "p1" / "prefect.db", tmp_path / "p2" / "prefect.db"
    assert _dump(copied) == _dump(made) == _dump(template)
    with sqlite3.connect(copied) as con:
        assert con.execute("select count(*) from alembic_version").fetchone()[0] == 1
        tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
    assert {"flow_run", "task_run", "deployment", "work_pool"} <= tables


def _template(kind: str) -> Path:
    path = store_templates.template_path(kind)
    assert path is not None
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _fake_store(path, rows=3)
    return path


def test_a_store_that_exists_is_never_replaced(tmp_path: Path, templates: Path) -> None:
    _template("mlflow")
    target = tmp_path / "home" / "mlflow.db"
    _fake_store(target, rows=7)
    before = target.read_bytes()
    assert not store_templates.seed(target, "mlflow")
    assert target.read_bytes() == before


def test_an_empty_file_is_a_new_store(tmp_path: Path, templates: Path) -> None:
    template = _template("mlflow")
    target = tmp_path / "mlflow.db"
    target.touch()
    assert store_templates.seed(target, "mlflow")
    assert target.read_bytes() == template.read_bytes()


@pytest.mark.parametrize("damage", ["truncated", "not sqlite", "markup"])
def test_a_damaged_template_is_not_used(tmp_path: Path, templates: Path, damage: str) -> None:
    template = _template("mlflow")
    data = template.read_bytes()
    template.write_bytes(
        {"truncated": data[: len(data) // 2], "not sqlite": b"\0" * 4096,
         "markup": b"<script>alert(1)</script>" * 200}[damage]
    )  # fmt: skip
    target = tmp_path / "mlflow.db"
    assert not store_templates.seed(target, "mlflow")
    assert not target.exists()


def test_a_folder_others_can_write_is_not_trusted(tmp_path: Path, templates: Path) -> None:
    _template("prefect")
    templates.chmod(0o777)
    target = tmp_path / "prefect.db"
    assert not store_templates.seed(target, "prefect")
    assert not target.exists()
    _fake_store(tmp_path / "new.db", migrated=True)
    (templates / "x").touch()
    for old in templates.glob("prefect-*.db"):
        old.unlink()
    assert not store_templates.save(tmp_path / "new.db", "prefect")  # nor written there
    assert not list(templates.glob("prefect-*.db"))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the folder to another user")
def test_a_folder_of_another_user_is_not_trusted(tmp_path: Path, templates: Path) -> None:
    _template("mlflow")
    os.chown(templates, 65534, 65534)
    assert not store_templates.seed(tmp_path / "mlflow.db", "mlflow")


def test_templates_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _fake_store(tmp_path / "new.db", migrated=True)
    for off in ("0", "off", "false"):
        monkeypatch.setenv(store_templates.ENV, off)
        assert store_templates.template_path("mlflow") is None
        assert not store_templates.save(tmp_path / "new.db", "mlflow")
        assert not store_templates.seed(tmp_path / "other.db", "mlflow")
    assert not (tmp_path / "cache").exists()
    monkeypatch.delenv(store_templates.ENV)
    assert str(store_templates.template_path("mlflow")).startswith(str(tmp_path / "cache"))


def test_save_never_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(store_templates.ENV, str(blocker / "templates"))
    _fake_store(tmp_path / "new.db", migrated=True)
    assert not store_templates.save(tmp_path / "new.db", "mlflow")
    monkeypatch.setenv(store_templates.ENV, str(tmp_path / "t"))
    assert not store_templates.save(tmp_path / "missing.db", "mlflow")  # no store to copy
    assert not (tmp_path / "missing.db").exists()
    _fake_store(tmp_path / "plain.db")
    assert not store_templates.save(tmp_path / "plain.db", "mlflow")  # not a migrated store
    assert store_templates.save(tmp_path / "new.db", "mlflow")
    assert [p.name for p in (tmp_path / "t").iterdir()] == [
        store_templates.template_path("mlflow").name  # type: ignore[union-attr]
    ]


def test_another_version_is_another_template(
    templates: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = store_templates.template_path("mlflow")
    monkeypatch.setattr(store_templates, "_version", lambda package: "9.9")
    after = store_templates.template_path("mlflow")
    assert before != after and before is not None and after is not None
    assert after.parent == before.parent == templates
