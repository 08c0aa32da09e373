"""The `greylab` command line.

Exit codes: 0 success; 2 bad input (a one-paragraph message on stderr, no traceback) and
usage errors (bad option value, unknown or missing option, unknown command: typer's own
click exceptions, `typer._click`, not the separately installed `click`), and a computation
too large for memory, a GREYLAB_HOME greylab cannot write; 130 interrupted; 1 internal or
infrastructure failure (a damaged MLflow store is named, `runtime.stores.StoreError`; otherwise
set `GREYLAB_DEBUG=1` for the traceback). Messages are cut to `MAX_MESSAGE` characters
(`flows.cli_common.clip`).

The console script `greylab` does not put the working folder on `sys.path` (`python -m
flows.cli` does: use `python -P -m flows.cli`); its child processes never do (`_start`).

The console script is a thin client of a warm fork server (`runtime.warm`: started on demand,
holding this module's imports, `warm_preload`): it runs the command in a fresh child of that
server and falls back to running in-process whenever the warm path is unavailable;
`GREYLAB_WARM=0` turns it off. This module imports only the standard library and
`runtime.settings` at import time, so the client stays cheap.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import sys
import traceback
from typing import Any

from runtime.settings import apply_environment


def build_app():  # -> typer.Typer (typer imported lazily, after the environment is set)
    import typer

    from flows import cli_cache, cli_ops
    from flows.studies import STUDIES

    app = typer.Typer(
        name="greylab",
        help="Experiment platform for grey-box models of machines.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode="markdown",
    )
    for study in STUDIES:  # `greylab press|drive|inverse|ingest …`
        importlib.import_module(study.cli).register(app)
    for module in (cli_ops, cli_cache):
        module.register(app)
    app.add_typer(_server_app(typer), name="server")
    return app


def _server_app(typer: Any) -> Any:
    """`greylab server status|stop`: the local Prefect server the CLI shares between calls."""
    server = typer.Typer(
        help="The local Prefect server greylab's commands share (runtime.local_server): it "
        "starts on demand and stops itself after GREYLAB_SERVER_IDLE seconds (default 120) "
        "without requests; GREYLAB_SERVER_IDLE=0 gives every command a temporary server. "
        "Also the warm command server (runtime.warm), which holds greylab's imports and runs "
        "each command in a fresh child: it stops after GREYLAB_WARM_IDLE seconds (default "
        "120); GREYLAB_WARM=0 runs every command in-process.",
        no_args_is_help=True,
    )

    @server.command("status")
    def status(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Whether the shared server runs, its pid and API URL; the warm command server too."""
        import json

        from runtime import warm
        from runtime.local_server import server_status

        info = {**server_status(), **warm.status()}
        if as_json:
            sys.stdout.write(json.dumps(info, indent=2) + "\n")
            return
        if info["running"]:
            sys.stdout.write(f"running: pid {info['pid']}, {info['api_url']}\n")
        else:
            sys.stdout.write("not running\n")
        if info["warm_running"]:
            sys.stdout.write(f"warm commands: running: pid {info['warm_pid']}\n")
        else:
            off = "" if info["warm_enabled"] else " (GREYLAB_WARM=0)"
            sys.stdout.write(f"warm commands: not running{off}\n")

    @server.command("stop")
    def stop() -> None:
        """Stop the shared server and the warm command server now (the next commands start
        them again; commands running in the warm server finish)."""
        from runtime import warm
        from runtime.local_server import stop_server

        pid = stop_server()
        sys.stdout.write(f"stopped pid {pid}\n" if pid else "not running\n")
        warm_pid = warm.stop()
        sys.stdout.write(f"warm commands: stopped pid {warm_pid}\n" if warm_pid
                         else "warm commands: not running\n")  # fmt: skip

    return server


def _start(argv: list[str] | None) -> None:
    """Settings, then what every command relies on: child processes never import from the
    working folder (`PYTHONSAFEPATH` when this process is the command; `run_flow` sets it
    for the flows of an in-process call); a GREYLAB_HOME greylab can write (else exit 2) and an undamaged local
    MLflow store (else exit 1), checked before any server starts (not for help or `cache`)."""
    from methods.errors import InputError
    from runtime.server_guard import install_import_hook, isolate_child_processes

    try:
        settings = apply_environment()
    except OSError as exc:  # e.g. GREYLAB_HOME below a read-only folder
        raise InputError(
            f"cannot create greylab's folder {str(exc.filename)[:300]} ({exc.strerror}): set "
            "GREYLAB_HOME (and GREYLAB_DATA_ROOT) to folders you can write"
        ) from None
    if argv is None:  # this process is the command: its children inherit the setting
        isolate_child_processes()
        from flows import runners

        runners.SHARE_SERVER = True  # flows use the shared local Prefect server
    install_import_hook()  # temporary Prefect servers die with this process, even on SIGKILL
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] != "cache" and not {"--help", "-h"} & set(args):
        from runtime.stores import check_home, check_local_store

        check_home(settings)
        check_local_store(settings)
        if argv is None and (tuple(args[:2]) in FLOW_COMMANDS or args[:1] == ["demo"]):
            from flows.runners import prestart_shared_server

            prestart_shared_server()  # starts while the command tree and the flow load


#: the commands that run a study flow (`greylab demo` too): the shared server is launched as
#: soon as the home is checked, and starts while the command loads (issue 31: medians 11.65 s
#: -> 8.55 s for `press detect` after the server idled out, docs/performance.md); a bad input found
#: later leaves a server that stops after its idle time
FLOW_COMMANDS = {("press", "detect"), ("drive", "identify"), ("drive", "fit"),
                 ("inverse", "run"), ("validation", "run")}  # fmt: skip


def main(argv: list[str] | None = None, *, warm_path: bool = True) -> int:
    """Run one command; its exit code. As the command's own process (`argv` None) it first
    tries the warm fork server (`runtime.warm`; on success this process leaves with the
    command's exit code), then runs the command itself: deferred tracking after the answer is
    printed (`runtime.deferred`), and it leaves without the interpreter's teardown
    (`_leave_at_exit`). `warm_path=False`: never the warm server (`python -m flows.cli`, whose
    working folder is on `sys.path`, unlike the console script's and the server's)."""
    from runtime import warm

    warm.remember_environment()  # as the command got it, before `_start` adds defaults
    if argv is None and warm_path and not _WARM_CHILD:
        outcome = warm.run(sys.argv, preload="flows.cli:warm_preload",
                           entry="flows.cli:warm_child_main")  # fmt: skip
        if outcome is not None:
            _leave_client(outcome)
    if argv is None:
        import atexit

        from runtime import deferred

        if not _LEAVE_REGISTERED:  # a warm child: registered before the preload's handlers
            atexit.register(_leave_at_exit)  # registered first: runs after every other handler
        deferred.enable()  # tracking that may wait runs after the answer (runtime.deferred)
    code = _main(argv)
    if argv is None:
        for stream in (sys.stdout, sys.stderr):  # the answer is out before deferred work
            stream.flush()
        deferred.run_deferred()  # failures: a warning each, the answer's exit code stays
    _EXIT_CODE[:] = [code]
    return code


#: the exit code `main` returned (for `_leave_at_exit`); empty when it raised
_EXIT_CODE: list[int] = []
#: this process is a child of the warm fork server (`warm_child_main`)
_WARM_CHILD = False
#: `_leave_at_exit` is registered already (by `warm_preload`, before any import's handler)
_LEAVE_REGISTERED = False


def _leave_client(outcome: int | tuple[str, int]) -> None:
    """The warm client leaves as its command did: with its exit code, or killed by the same
    signal."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    if isinstance(outcome, tuple):
        import signal
        import time

        signal.signal(outcome[1], signal.SIG_DFL)
        os.kill(os.getpid(), outcome[1])
        time.sleep(1.0)
        os._exit(128 + outcome[1])
    os._exit(outcome)


def warm_preload() -> None:
    """In the warm fork server (`runtime.warm`), before it serves: what every command imports
    (the command tree, the study flows with Prefect, MLflow's tracking and registry stores,
    matplotlib), with the environment applied first as `_start` does. Starts no thread."""
    import atexit

    global _LEAVE_REGISTERED
    atexit.register(_leave_at_exit)  # as in `main`: before any handler of an import
    _LEAVE_REGISTERED = True
    apply_environment()
    from runtime.server_guard import install_import_hook

    install_import_hook()
    build_app()
    from flows.studies import STUDIES

    modules = [study.cli.rsplit(".", 1)[0] + ".flow" for study in STUDIES]
    modules += ["tracking.mlflow_tracker", "products.register", "flows.cli_common",
                "mlflow.store.tracking.sqlalchemy_store", "mlflow.store.model_registry.sqlalchemy_store",
                "mlflow.pyfunc", "matplotlib.pyplot", "prefect.flow_engine", "prefect.task_engine",
                "prefect.client.orchestration", "prefect.task_runners", "anyio._backends._asyncio",
                # imported lazily on the way of a command (measured: a press detect's new
                # modules after this preload; pandera's backends, MLflow's stores and logging)
                "pandera", "dask.dataframe", "dask.array", "hypothesis.extra.pandas", "graphviz",
                "pyarrow", "pyarrow.parquet", "jinja2", "alembic.command", "alembic.config",
                "PIL.PngImagePlugin", "email.policy", "scipy.stats", "scipy.optimize",
                "pandera.accessors.pandas_accessor", "pandera.strategies.pandas_strategies",
                "pandera.typing.dask", "pandera.typing.geopandas", "pandera.typing.modin",
                "pandera.typing.pyspark", "pandera.backends.register_checks",
                "matplotlib.backends.backend_agg", "sqlalchemy.dialects.sqlite", "prefect.artifacts",
                "prefect.utilities.visualization", "products.pyfunc", "netrc", "typer._adapters",
                "mlflow.store.workspace_aware_mixin", "PIL.JpegImagePlugin", "PIL.WebPImagePlugin",
                "PIL.GifImagePlugin", "PIL.BmpImagePlugin", "PIL.PpmImagePlugin"]  # fmt: skip
    for module in modules:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)


def warm_child_main() -> int:
    """A warm child's command (`runtime.warm`): `main` as the command's own process."""
    global _WARM_CHILD
    _WARM_CHILD = True
    return main()


def _leave_at_exit() -> None:
    """The last exit handler: everything a command writes is written (its output, MLflow's
    store, Prefect's logs and events, drained by `flows.runners.run_flow`) and every other
    exit handler has run; the interpreter's teardown of a few thousand modules would still
    take 1-3 s (measured 2.6 s at load 5, benchmarks/cli_overhead.py), so leave now."""
    if not _EXIT_CODE:  # an exception escaped main: let Python report and exit as usual
        return
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    if _WARM_CHILD:
        from runtime.warm_daemon import report_exit

        report_exit(_EXIT_CODE[0])  # the warm client exits with it
    os._exit(_EXIT_CODE[0])


def _main(argv: list[str] | None) -> int:
    from methods.errors import InputError
    from runtime.stores import StoreError

    try:
        _start(argv)
    except (InputError, StoreError) as exc:
        sys.stderr.write(f"greylab: error: {str(exc)[:2000]}\n")
        return 2 if isinstance(exc, InputError) else 1
    import typer
    from typer._click import exceptions as click_exceptions

    from flows.cli_common import clip

    command = typer.main.get_command(build_app())
    try:
        result = command.main(args=argv, prog_name="greylab", standalone_mode=False)
    except InputError as exc:
        sys.stderr.write(f"greylab: error: {clip(str(exc))}\n")
        return 2
    except StoreError as exc:  # an infrastructure failure, named: no traceback
        sys.stderr.write(f"greylab: error: {clip(str(exc))}\n")
        return 1
    except typer.Abort:
        sys.stderr.write("greylab: aborted\n")
        return 130
    except click_exceptions.ClickException as exc:  # usage errors: exit_code 2
        exc.message = clip(exc.message)
        exc.show()
        return exc.exit_code if exc.exit_code else 2
    except typer.Exit as exc:
        return int(exc.exit_code)
    except OSError as exc:
        if exc.errno not in _USER_PATH_ERRORS:
            return _internal(exc)
        name = clip(repr(str(exc.filename)), 200) if exc.filename else "a path"
        sys.stderr.write(f"greylab: error: {name}: {exc.strerror} (a path given on the command "
                         "line or in a file it names; shorten or correct it)\n")  # fmt: skip
        return 2
    except MemoryError:
        sys.stderr.write(
            "greylab: error: out of memory: the requested computation does not fit in this "
            "machine's memory; reduce its size (steps t_end/dt, tests, population x "
            "generations) - see the limits in docs/trust.md\n"
        )
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("greylab: interrupted\n")
        return 130
    except Exception as exc:
        if type(exc).__name__ == "StoreUnreadable":  # products.files: the store failed
            store = clip(os.environ.get("MLFLOW_TRACKING_URI", ""), 300)
            sys.stderr.write(f"greylab: error: {clip(str(exc))} (store: {store})\n")
            return 1
        return _internal(exc)
    return int(result) if isinstance(result, int) else 0


#: OS errors a path typed by the user causes (exit 2): a name or path too long, a loop of links
_USER_PATH_ERRORS = (errno.ENAMETOOLONG, errno.ELOOP)


def _internal(exc: BaseException) -> int:
    from flows.cli_common import clip

    if os.environ.get("GREYLAB_DEBUG"):
        traceback.print_exc()
    sys.stderr.write(
        f"greylab: internal error: {type(exc).__name__}: {clip(str(exc))}\n"
        "(set GREYLAB_DEBUG=1 to see the traceback)\n"
    )
    return 1


if __name__ == "__main__":
    raise SystemExit(main(warm_path=False))
