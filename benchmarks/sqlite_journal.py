"""MLflow's SQLite store in WAL mode against its default rollback journal (issue 31).

Two fresh stores in one folder on the same disk, each opened by an ``MlflowClient``; one is
switched to WAL by greylab's ``runtime.sqlite_journal.use_write_ahead_log``. A press study's
pattern of calls is run on each, alternating, ``--rounds`` times: a parent run with three
child runs, each child started, given 5 tags and one ``log_batch`` of 20 params and 30
metrics, and ended (about 20 commits a round; a ``press detect`` makes about 80). The figure
is the median time of a round per store and their ratio (rollback / WAL), both measured in
the same repeat. Durability is the same in both: ``synchronous`` stays FULL.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/sqlite_journal.py [--rounds 15] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

from benchmarks._report import Bench, add_arguments  # noqa: E402
from runtime.sqlite_journal import use_write_ahead_log  # noqa: E402


def one_round(client: Any, experiment: str) -> float:
    from mlflow.entities import Metric, Param, RunTag

    t = time.perf_counter()
    parent = client.create_run(experiment).info.run_id
    for k in range(3):
        run = client.create_run(experiment, tags={"mlflow.parentRunId": parent}).info.run_id
        for i in range(5):
            client.set_tag(run, f"tag{i}", f"value {k}")
        now = int(time.time() * 1000)
        client.log_batch(
            run,
            metrics=[Metric(f"m{i}", float(i), now, 0) for i in range(30)],
            params=[Param(f"p{i}", str(i)) for i in range(20)],
            tags=[RunTag("greylab.study", "press")],
        )
        client.set_terminated(run)
    client.set_terminated(parent)
    return time.perf_counter() - t


def measure(bench: Bench, rounds: int) -> None:
    from mlflow import MlflowClient

    with tempfile.TemporaryDirectory(dir=ROOT / "build") as tmp:
        clients = {}
        for mode in ("rollback", "wal"):
            db = Path(tmp) / f"{mode}.db"
            client = MlflowClient(tracking_uri=f"sqlite:///{db}")
            client.search_experiments(max_results=1)  # creates the store
            if mode == "wal" and use_write_ahead_log(db) != "wal":
                raise SystemExit(f"{tmp} is not on a local disk: WAL was not set")
            clients[mode] = (client, client.create_experiment("bench"))
        times: dict[str, list[float]] = {"rollback": [], "wal": []}
        for _ in range(rounds):
            for mode, (client, experiment) in clients.items():
                times[mode].append(one_round(client, experiment))
    rollback, wal = (statistics.median(times[m]) for m in ("rollback", "wal"))
    print(f"round of 4 runs (~20 commits): rollback journal {rollback * 1e3:.0f} ms, "
          f"WAL {wal * 1e3:.0f} ms, {rollback / wal:.2f}x")  # fmt: skip
    bench.add("round_rollback_ms", rollback * 1e3, "a round of 4 MLflow runs, rollback journal",
              unit="ms", fmt=".0f")  # fmt: skip
    bench.add("round_wal_ms", wal * 1e3, "a round of 4 MLflow runs, WAL", unit="ms", fmt=".0f")
    bench.add("wal_ratio", rollback / wal, "MLflow SQLite calls, rollback journal / WAL",
              unit="×", fmt=".2f")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    add_arguments(parser, repeats=3)
    args = parser.parse_args()
    (ROOT / "build").mkdir(exist_ok=True)
    warnings.filterwarnings("ignore")
    bench = Bench("sqlite_journal", "platform", args.repeats, args.json)
    for _ in bench.runs():
        measure(bench, args.rounds)
    bench.finish()


if __name__ == "__main__":
    main()
