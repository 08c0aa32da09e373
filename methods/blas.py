"""One BLAS/OpenMP thread for small dense linear algebra in a hot loop.

With OpenBLAS' default thread pool on a loaded 2-core machine, small factorisations
oversubscribe the cores: one SVD of 2001 x 13 took 85 ms instead of ~1 ms in the drive-train
identification (a screening of {4,9,10,11} went from 3.3 s to 0.9 s with one thread), and an
SLSQP step of the sensor-design branch-and-bound 30 ms instead of 1 ms.
"""

from __future__ import annotations

from typing import Any


def single_threaded_blas() -> Any:
    """Context manager limiting the BLAS/OpenMP pools to one thread (`threadpoolctl`)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)
