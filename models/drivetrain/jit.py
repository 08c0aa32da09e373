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

Optimisation level (``opt``, default ``-O0``): the simulator picks it by the work of one
simulation with sensitivities (``models.drivetrain.simulate.optimisation``, ``"auto"``): light
simulators, as every one of the paper's reference, are compiled at ``-O0`` (tcc: the fastest
compile); heavy ones, as EMPS models with backlash (32 substeps per sample), at ``-O1`` with
``cc``, whose Jacobians run 2.3-3.5x faster for 0.1-0.35 s more compile
(``benchmarks/drive_jit.py``). For ``-O1``/``-O2`` the order of compilers is ``cc`` then tcc.
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
    for cc in compilers(opt):
        digest = hashlib.sha256(" ".join([code, cc, *flags]).encode()).hexdigest()[:24]
        lib = cache_dir() / f"{funs[0].name()}_{digest}.so"
        if not lib.exists() and (not build or not _build(code, cc, flags, lib, digest)):
            continue
        return [ca.external(fun.name(), str(lib)) for fun in funs]
    return list(funs)


def compilers(opt: str = "-O0") -> list[str]:
    """The C compilers to try in turn: ``$CC`` alone if set, else for ``-O0`` ``tcc`` (if
    installed) then ``cc``, for an optimised build ``cc`` then ``tcc`` (which does not
    optimise)."""
    if os.environ.get("CC"):
        return [os.environ["CC"]]
    tcc = ["tcc"] if shutil.which("tcc") else []
    return [*tcc, "cc"] if opt == "-O0" else ["cc", *tcc]


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
