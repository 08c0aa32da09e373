"""`greylab cache clear` deletes only what greylab made (issue 28, item 3).

It used to `rmtree` whatever `GREYLAB_CACHE_DIR` named: `.` took the lab's results,
`$GREYLAB_HOME` the MLflow store, artifacts and registered models (exit 0). Now the cache
folder carries a marker greylab writes when it creates the folder, only cache entries inside
a marked folder are removed, anything else is refused with exit 2 and nothing is deleted; a
writer adding or removing entries meanwhile does not make it fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tasks import cache

GREYLAB = Path(sys.executable).parent / "greylab"
ENTRY = "0123456789abcdef0123456789abcdef"  # a Prefect result file named by its cache key


def _clear(cwd: Path, home: Path, cache_dir: str | None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GREYLAB_HOME": str(home)}
    env.pop("GREYLAB_CACHE_DIR", None)
    if cache_dir is not None:
        env["GREYLAB_CACHE_DIR"] = cache_dir
    return subprocess.run(
        [str(GREYLAB), "cache", "clear", "--json"], cwd=cwd, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _lab(folder: Path) -> Path:
    (folder / "results").mkdir(parents=True)
    (folder / "lab.csv").write_text("series,step\n0,0\n")
    (folder / "results" / "fit.json").write_text("{}")
    (folder / ENTRY).write_bytes(b"looks like a cache entry, but the folder is not a cache")
    return folder


def test_cache_dir_dot_is_refused_and_the_lab_folder_is_untouched(tmp_path: Path) -> None:
    lab = _lab(tmp_path / "lab")
    before = _tree(lab)
    done = _clear(lab, tmp_path / "home", ".")
    assert done.returncode == 2, done.stderr
    message = done.stderr.strip()
    assert message.startswith("greylab: error: GREYLAB_CACHE_DIR ") and "\n" not in message
    assert str(lab) in message and "nothing was deleted" in message
    assert "Traceback" not in done.stderr
    assert _tree(lab) == before


def test_cache_dir_greylab_home_is_refused_and_the_store_is_untouched(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "mlartifacts" / "1").mkdir(parents=True)
    (home / "mlflow.db").write_bytes(b"SQLite format 3\x00" + b"\x00" * 84)
    (home / "mlartifacts" / "1" / "model.json").write_text("{}")
    before = _tree(home)
    done = _clear(tmp_path, home, str(home))
    assert done.returncode == 2, done.stderr
    assert "mlflow.db" in done.stderr or "mlartifacts" in done.stderr
    assert _tree(home) == before


def test_a_marked_cache_loses_only_its_entries(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = cache.ensure_cache_dir(home / "cache")
    assert (folder / cache.MARKER).is_file()
    (folder / ENTRY).write_bytes(b"12345")
    (folder / "notes.txt").write_text("kept")
    (folder / "sub").mkdir()
    (folder / "sub" / ENTRY).write_text("kept: entries live at the top level only")
    done = _clear(tmp_path, home, None)  # the default: $GREYLAB_HOME/cache
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["files_removed"] == 1 and result["bytes_removed"] == 5
    assert result["files_kept"] == 2
    assert sorted(p.name for p in folder.iterdir()) == sorted([cache.MARKER, "notes.txt", "sub"])


def test_an_earlier_versions_cache_is_adopted_and_cleared(tmp_path: Path) -> None:
    folder = tmp_path / "old-cache"
    folder.mkdir()
    (folder / ENTRY).write_bytes(b"x")
    (folder / ENTRY.replace("0", "f")).write_bytes(b"yy")
    assert cache.clear_cache(folder)["files_removed"] == 2
    assert [p.name for p in folder.iterdir()] == [cache.MARKER]


def test_the_cache_folder_of_a_run_is_created_with_its_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect import task

    monkeypatch.setenv("GREYLAB_CACHE_DIR", str(tmp_path / "c"))
    cache.cached(task(lambda: 1), enabled=True)
    assert (tmp_path / "c" / cache.MARKER).is_file()


def test_clear_racing_a_writer_never_fails(tmp_path: Path) -> None:
    folder = cache.ensure_cache_dir(tmp_path / "cache")
    stop = threading.Event()

    def writer() -> None:
        n = 0
        while not stop.is_set():
            name = folder / f"{n % 50:032x}"
            name.write_bytes(b"r" * 100)
            if n % 3 == 0:
                name.unlink(missing_ok=True)
            n += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(200):
            cache.clear_cache(folder)
    finally:
        stop.set()
        thread.join()
    assert (folder / cache.MARKER).is_file()


def test_an_entry_removed_between_listing_and_deleting_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = cache.ensure_cache_dir(tmp_path / "cache")
    (folder / ENTRY).write_bytes(b"12")
    listed = cache._entries(folder)
    (folder / ENTRY).unlink()  # the writer (or a second clear) was faster
    monkeypatch.setattr(cache, "_entries", lambda directory: listed)
    assert cache.clear_cache(folder)["files_removed"] == 0
