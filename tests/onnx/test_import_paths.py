"""The backend is reachable the ways docs/onnx.md writes it, each in a fresh interpreter.

The suite's other tests import ``staticsched.onnx.backend`` by its full path first, which hid a
recursion in the package's lazy attribute; these run in a subprocess so nothing is imported yet.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("onnx")

WAYS = {
    "from-import": "from staticsched.onnx import backend; print(backend.prepare.__name__)",
    "attribute": "import staticsched.onnx; print(staticsched.onnx.backend.prepare.__name__)",
    "full path": "import staticsched.onnx.backend as b; print(b.prepare.__name__)",
}

# ``sys.modules["onnx"] = None`` makes every ``import onnx`` fail, as on a machine without it
WITHOUT_ONNX = "import sys; sys.modules['onnx'] = None\n"


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.parametrize("way", sorted(WAYS))
def test_backend_imports_in_a_fresh_interpreter(way: str) -> None:
    done = _run(WAYS[way])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "prepare"


@pytest.mark.parametrize("way", ["from-import", "attribute"])
def test_without_onnx_the_error_names_the_extra(way: str) -> None:
    done = _run(WITHOUT_ONNX + WAYS[way])
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: ")
    assert "pip install 'staticsched[onnx]'" in last
    assert "RecursionError" not in done.stderr


def test_the_package_itself_imports_without_onnx() -> None:
    done = _run(WITHOUT_ONNX + "import staticsched.onnx; print(staticsched.onnx.import_model.__name__)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "import_model"
