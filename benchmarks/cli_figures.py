"""Figures beside the work (issue 31): warm ``greylab press detect`` with its figures drawn by
a second process as they are queued (`runtime.figures`, the default) against every figure
drawn by the command's own process after the answer (``GREYLAB_FIGURE_CHILD=0``).

    PYTHONPATH=. .venv/bin/python benchmarks/cli_figures.py --repeats 5

One warm ``GREYLAB_HOME`` (the twin study run once with each setting first: result cache,
shared Prefect server, one warm command server per setting, as the setting is part of a
server's key); each repeat then times both settings, in alternating order, to the answer on
stdout and to the process exit (``benchmarks/cli_overhead.py``'s ``cli_timed``). The ratio is
taken within each repeat. The press study logs eight figures (design, design curve, and an
ellipsoid and a hysteresis figure per model).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout

from benchmarks._cli_overhead_warm import cli_timed, stop_warm, warm_server  # noqa: E402
from benchmarks._report import Bench, add_arguments  # noqa: E402
from benchmarks.cli_overhead import PRESS, _env, _stop  # noqa: E402
from runtime.figures import CHILD_ENV  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, repeats=3)
    args = parser.parse_args()
    bench = Bench("cli_figures", "platform", args.repeats, args.json)
    with tempfile.TemporaryDirectory(prefix="greylab-figures-bench-") as tmp:
        root = Path(tmp)
        cwd, home = root / "lab", root / "home"
        cwd.mkdir()
        on = _env(home, "600", root / "jit", warm="1")
        settings = {"children": on, "here": {**on, CHILD_ENV: "0"}}
        try:
            for env in settings.values():
                warm_server(env, cwd)
                cli_timed(PRESS, env, cwd)  # warms the home, the caches and this server
            for i in bench.runs():
                order = list(settings) if i % 2 == 0 else list(reversed(settings))
                times = {name: cli_timed(PRESS, settings[name], cwd) for name in order}
                for name, (answer, exit_s) in times.items():
                    bench.add(f"answer_{name}", answer, f"warm press detect, figures {name}: "
                              "answer printed at", unit="s", fmt=".2f")  # fmt: skip
                    bench.add(f"exit_{name}", exit_s, f"warm press detect, figures {name}: "
                              "process exit", unit="s", fmt=".2f",
                              target=("<=", 3.0) if name == "children" else None)  # fmt: skip
                bench.add("exit_ratio", times["here"][1] / times["children"][1], "warm press "
                          "detect exit, figures here / figures by a second process as queued "
                          "(same repeat)", unit="×", fmt=".2f")  # fmt: skip
        finally:
            for env in settings.values():
                stop_warm(env, cwd)
            _stop(home)
    bench.finish()


if __name__ == "__main__":
    main()
