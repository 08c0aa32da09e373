"""Compile small CasADi SX functions to C with the system compiler, cached on disk.

The cache key is a SHA-256 of the generated C source, the compiler and its flags, so a
structure is compiled once per machine (all worker processes and later searches reuse the
shared library). Directory: ``$GREYLAB_JIT_CACHE`` or ``~/.cache/greylab/jit``.

Compiler: ``$CC`` if set, else the Tiny C Compiler ``tcc`` when installed (Debian package
``tcc``), else ``cc``; if one fails the next is tried, then the interpreted function is used.
``tcc`` compiles 2-5x faster than ``gcc -O0`` and its code runs as fast, with the same outputs
and Jacobians (``tests/models/drivetrain/test_jit.py``); in a cold-cache search with gcc the C
compiler took 43 % of the wall (``CC=cc`` / ``CC=tcc benchmarks/drive_profile.py profile``,
figures in README).

Optimisation level (``opt``, default ``-O0``): measured on the reference record (2001 samples,
this 2-core machine), compile time and cost of one simulation with sensitivities:

    structure             n_p   -O0 compile / jac     -O1 compile / jac    interpreted jac
    {2,5,6,7}               8   0.45 s / 9 ms         0.76 s / 7 ms        47..60 ms
    {2,5,6,7,9}             9   0.92 s / 25 ms        2.15 s / 11 ms       134 ms
    {4,5,6,7,8,9,10,11}    18   2.4 s / 83 ms         7.0 s / 28 ms        0.4 s

A GP identification needs ~20-60 Jacobians, so for a structure identified once (the search
caches evaluations per structure) ``-O0`` is the cheapest way (compile + run) in every case;
``-O1`` pays off only for long reuse (e.g. a warm disk cache across many searches).
If compilation fails the interpreted function is returned (slower, same numbers).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import casadi as ca

FLAGS = ("-shared", "-fPIC")
OPT_LEVELS = ("-O0", "-O1", "-O2")


def cache_dir() -> Path:
    root = os.environ.get("GREYLAB_JIT_CACHE") or Path.home() / ".cache" / "greylab" / "jit"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def compiled(fun: ca.Function, *, build: bool = True, opt: str = "-O0") -> ca.Function:
    """The same function as a loaded shared library (``ca.external``). With ``build=False``
    only an already cached library is used (otherwise ``fun`` itself is returned).
    ``opt``: one of :data:`OPT_LEVELS`."""
    return compiled_many([fun], build=build, opt=opt)[0]


def compiled_many(
    funs: list[ca.Function], *, build: bool = True, opt: str = "-O0"
) -> list[ca.Function]:
    """Several functions in one C file and one shared library (one compiler call); the
    functions themselves are returned if the library is missing and ``build=False`` or if the
    compiler fails."""
    if opt not in OPT_LEVELS:
        raise ValueError(f"opt must be one of {OPT_LEVELS}, got {opt!r}")
    flags = (opt, *FLAGS)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "f.c"
        gen = ca.CodeGenerator("f.c")
        for fun in funs:
            gen.add(fun)
        gen.generate(tmp + os.sep)
        code = src.read_text()
    for cc in compilers():
        digest = hashlib.sha256(" ".join([code, cc, *flags]).encode()).hexdigest()[:24]
        lib = cache_dir() / f"{funs[0].name()}_{digest}.so"
        if not lib.exists() and (not build or not _build(code, cc, flags, lib, digest)):
            continue
        return [ca.external(fun.name(), str(lib)) for fun in funs]
    return list(funs)


def compilers() -> list[str]:
    """The C compilers to try in turn: ``$CC`` alone if set, else ``tcc`` (if installed),
    then ``cc``."""
    if os.environ.get("CC"):
        return [os.environ["CC"]]
    return (["tcc"] if shutil.which("tcc") else []) + ["cc"]


def _build(code: str, cc: str, flags: tuple[str, ...], lib: Path, digest: str) -> bool:
    """Compile ``code`` into ``lib`` atomically (a temporary name, then a rename, so
    concurrent workers never load half a file); False if the compiler fails."""
    work = cache_dir() / f"{digest}.{os.getpid()}.c"
    work.write_text(code)
    tmp_lib = lib.with_suffix(f".{os.getpid()}.tmp")
    try:
        subprocess.run([cc, *flags, str(work), "-o", str(tmp_lib), "-lm"], check=True,
                       capture_output=True, timeout=300)  # fmt: skip
        os.replace(tmp_lib, lib)
        return True
    except (OSError, subprocess.SubprocessError):
        tmp_lib.unlink(missing_ok=True)
        return False
    finally:
        work.unlink(missing_ok=True)
