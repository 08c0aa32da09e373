"""Fixtures shared by the recorder tests."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="module")
def drive(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real two-generation structure search on a short noise-free recording."""
    from models.drivetrain.excitation import reference_recording
    from models.drivetrain.gp.search import StructureSearch
    from models.drivetrain.gp.settings import IdentificationSettings
    from schemas.storage import content_hash, store_table

    recording = reference_recording(["one_mass", "viscous", "coulomb"], duration=0.6)
    folder = tmp_path_factory.mktemp("drive")
    path = str(store_table(recording, folder, content_hash(recording)))
    bests: list[Any] = []
    search = StructureSearch(
        population=4, generations=2, seed=2,
        allowed=("one_mass", "two_mass", "coulomb", "viscous", "gravity"),
        identification=IdentificationSettings(n_starts=1, max_nfev=15, jit=False),
        progress=lambda g, n, best: bests.append((g, best)),
    ).fit(recording)  # fmt: skip
    return dict(recording=recording, path=path, search=search, bests=bests)
