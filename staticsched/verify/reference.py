"""The numeric replay's inputs and NumPy reference, from a program's source TaskGraph.

:func:`reference` computes them. For a big program :class:`Reference` computes them in a
separate Python process (:func:`_main`) beside the index and the
replay: a thread would hold the verifier's GIL between NumPy calls, and a forked child would
make the verifier copy every page it writes while the child lives (its ~10^7 objects' reference
counts). The child gets ``(source, seed, path)`` on its standard input and writes the result
pickled to the temporary file ``path`` (the 4096^3 GEMM's is 100 MB: read from a file once
the child has ended, not through a pipe 64 KB at a time); should it fail, the values are
computed here, so the result never depends on how they were computed.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from staticsched.errors import StaticschedError
from staticsched.verify.report import Finding

Prepared = tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | Finding


def reference(source: str, seed: int) -> Prepared:
    """Inputs and NumPy reference of the source TaskGraph, or an ``input`` finding."""
    from staticsched.frontend.reference import make_inputs
    from staticsched.frontend.reference import reference as evaluate
    from staticsched.frontend.taskgraph import taskgraph_from_dict

    try:
        data = json.loads(source)
        tg = taskgraph_from_dict(data, "<program source>")
    except json.JSONDecodeError as exc:
        return Finding("input", "bad_source", f"the program's source TaskGraph is not JSON: {exc}")
    except StaticschedError as exc:
        return Finding(
            "input", "bad_source", "the program's source TaskGraph is invalid: " + "; ".join(exc.problems)
        )
    inputs = make_inputs(tg, seed)
    return dict(inputs), dict(evaluate(tg, inputs))


class Reference:
    """:func:`reference` of ``(source, seed)``: under way in a child process when ``beside``,
    else computed when asked for."""

    def __init__(self, source: str, seed: int, beside: bool) -> None:
        self.source, self.seed = source, seed
        self.proc: subprocess.Popen | None = None
        self.path: str | None = None
        if beside:
            try:
                fd, self.path = tempfile.mkstemp(prefix="staticsched-reference-", suffix=".pickle")
                os.close(fd)
            except OSError:
                return
            self.proc = _start(pickle.dumps((source, seed, self.path)))

    def get(self) -> Prepared:
        """The result (waits for the child)."""
        proc, self.proc = self.proc, None
        try:
            if proc is not None and self.path is not None and proc.wait() == 0:
                with open(self.path, "rb") as f:
                    return pickle.load(f)
        except (OSError, EOFError, pickle.UnpicklingError):
            pass
        finally:
            self.close()
        return reference(self.source, self.seed)

    def close(self) -> None:
        """Stop the child if it still runs and remove its file (idempotent)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            self.path = None


def _start(job: bytes) -> subprocess.Popen | None:
    # the child imports this package from where this process did, whatever sys.path says
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    # one BLAS thread: the verifier's own process has the other CPU
    env.update({name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")})
    try:
        proc = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, env=env)
        assert proc.stdin is not None
        proc.stdin.write(job)
        proc.stdin.close()
    except OSError:
        return None
    return proc


def _main() -> None:
    """The child: ``(source, seed, path)`` pickled on standard input, the result pickled into
    the file ``path``."""
    source, seed, path = pickle.load(sys.stdin.buffer)
    with open(path, "wb") as f:
        pickle.dump(reference(source, seed), f, protocol=pickle.HIGHEST_PROTOCOL)


_CHILD = "from staticsched.verify.reference import _main; _main()"
