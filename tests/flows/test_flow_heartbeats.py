"""Flow runs greylab starts itself send no Prefect heartbeats unless the heartbeat frequency
was set (`flows.runners.heartbeats_if_asked`, issue 31): with heartbeats on, every flow run
waited at its end for the heartbeat thread's one-second sleep. A set frequency is kept."""

from __future__ import annotations

import threading
import time

from prefect import flow
from prefect.settings import (
    PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
    get_current_settings,
    temporary_settings,
)

from flows.runners import run_flow


@flow
def probe(study: float) -> dict:
    """The heartbeat frequency the flow run sees, and whether a heartbeat thread runs."""
    time.sleep(study)
    return {
        "frequency": get_current_settings().flows.heartbeat_frequency,
        "heartbeat_thread": any(_is_heartbeat(t) for t in threading.enumerate()),
    }


def _is_heartbeat(thread: threading.Thread) -> bool:
    """Prefect's heartbeat thread runs `heartbeat_loop` in a copied context."""
    args = getattr(thread, "_args", ())
    return bool(args) and getattr(args[0], "__name__", "") == "heartbeat_loop"


def test_a_flow_run_started_by_greylab_sends_no_heartbeats_unless_asked() -> None:
    assert get_current_settings().flows.heartbeat_frequency == 180  # Prefect's default here
    seen = run_flow(probe, 0.0, runner="thread", workers=1)
    assert seen["frequency"] is None
    assert get_current_settings().flows.heartbeat_frequency == 180  # restored after the run
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: 60}):  # the user's
        asked = run_flow(probe, 0.0, runner="thread", workers=1)
    assert asked["frequency"] == 60
    assert asked["heartbeat_thread"] and not seen["heartbeat_thread"]
