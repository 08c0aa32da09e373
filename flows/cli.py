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
        "without requests; GREYLAB_SERVER_IDLE=0 gives every command a temporary server.",
        no_args_is_help=True,
    )

    @server.command("status")
    def status(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Whether the shared server runs, its pid and API URL."""
        import json

        from runtime.local_server import server_status

        info = server_status()
        if as_json:
            sys.stdout.write(json.dumps(info, indent=2) + "\n")
        elif info["running"]:
            sys.stdout.write(f"running: pid {info['pid']}, {info['api_url']}\n")
        else:
            sys.stdout.write("not running\n")

    @server.command("stop")
    def stop() -> None:
        """Stop the shared server now (the next command starts one again)."""
        from runtime.local_server import stop_server

        pid = stop_server()
        sys.stdout.write(f"stopped pid {pid}\n" if pid else "not running\n")

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


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit code. As the command's own process (`argv` None) it runs
    deferred tracking after the answer is printed (`runtime.deferred`) and leaves without the
    interpreter's teardown (`_leave_at_exit`)."""
    if argv is None:
        import atexit

        from runtime import deferred

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
    raise SystemExit(main())
