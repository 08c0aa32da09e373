"""Fixtures of the GP tests: a two-process ``map_batches`` like the benchmark's and the flow's."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

import pytest


@pytest.fixture
def process_map():
    """``map_batches`` on two worker processes (the machine's cores); the pool is shut down
    when the test ends."""
    with ProcessPoolExecutor(max_workers=2) as pool:

        def map_batches(fn, batches):
            return list(pool.map(fn, batches))

        yield map_batches
