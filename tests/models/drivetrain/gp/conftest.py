"""Fixtures of the GP tests: a two-process ``map_batches`` (the search is the same as on the
benchmark's and the flow's asynchronous ``submit_batch``, see ``models.drivetrain.gp.dispatch``)."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

import pytest

from models.drivetrain.excitation import reference_recording


@pytest.fixture
def process_map():
    """``map_batches`` on two worker processes (the machine's cores); the pool is shut down
    when the test ends."""
    with ProcessPoolExecutor(max_workers=2) as pool:

        def map_batches(fn, batches):
            return list(pool.map(fn, batches))

        yield map_batches


@pytest.fixture(scope="module")
def recording():
    """A short record of a simple truth, {one_mass, coulomb, viscous} (each simulation ~1 ms:
    keeps the search tests fast)."""
    return reference_recording(["one_mass", "viscous", "coulomb"], duration=0.6)
