"""Compile small CasADi SX functions to C with the system compiler, cached on disk.

The cache key is a SHA-256 of the generated C source, so a structure is compiled once per
machine (all worker processes and later searches reuse the shared library). Directory:
``$GREYLAB_JIT_CACHE`` or ``~/.cache/greylab/jit``. Compiler: ``$CC`` or ``cc``, ``-O1``.
Strategy (``models.drivetrain.simulate.get_simulator``): the first request of a structure in a
process uses a cached library if there is one, else the interpreted function; the second
request compiles. Structures that survive in the GP are compiled, one-offs are not.
If compilation fails the interpreted function is returned (slower, same numbers).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import casadi as ca

FLAGS = ("-O1", "-shared", "-fPIC")


def cache_dir() -> Path:
    root = os.environ.get("GREYLAB_JIT_CACHE") or Path.home() / ".cache" / "greylab" / "jit"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def compiled(fun: ca.Function, *, build: bool = True) -> ca.Function:
    """The same function as a loaded shared library (``ca.external``). With ``build=False``
    only an already cached library is used (otherwise ``fun`` itself is returned)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "f.c"
        gen = ca.CodeGenerator("f.c")
        gen.add(fun)
        gen.generate(tmp + os.sep)
        code = src.read_text()
    digest = hashlib.sha256((code + " ".join(FLAGS)).encode()).hexdigest()[:24]
    lib = cache_dir() / f"{fun.name()}_{digest}.so"
    if not lib.exists() and not build:
        return fun
    if not lib.exists():
        work = cache_dir() / f"{digest}.{os.getpid()}.c"
        work.write_text(code)
        tmp_lib = lib.with_suffix(f".{os.getpid()}.tmp")
        cc = os.environ.get("CC", "cc")
        try:
            subprocess.run([cc, *FLAGS, str(work), "-o", str(tmp_lib), "-lm"], check=True,
                           capture_output=True, timeout=300)  # fmt: skip
            os.replace(tmp_lib, lib)  # atomic: concurrent workers never load half a file
        except (OSError, subprocess.SubprocessError):
            return fun
        finally:
            work.unlink(missing_ok=True)
    return ca.external(fun.name(), str(lib))
