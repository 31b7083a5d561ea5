"""The example graphs shipped with staticsched (``staticsched examples DIR`` copies them)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from staticsched._atomic import atomic_write_bytes

#: the ONNX models and their generator, under ``onnx/``
ONNX_FILES = (".onnx", ".py", ".md")


def example_names() -> list[str]:
    """File names of the shipped examples (the ONNX ones as ``onnx/NAME``), sorted."""
    root = resources.files("staticsched") / "examples"
    names = [p.name for p in root.iterdir() if p.name.endswith((".json", ".toml"))]
    onnx = root / "onnx"
    if onnx.is_dir():
        names += [f"onnx/{p.name}" for p in onnx.iterdir() if p.name.endswith(ONNX_FILES)]
    return sorted(names)


def copy_examples(directory: str | Path) -> list[Path]:
    """Copy every shipped example into ``directory`` (created if missing); files already there
    with the same name are replaced.

    Returns
    -------
    list of Path
        The files written, sorted by name.

    Raises
    ------
    InputError
        When the directory or a file cannot be written.
    """
    root = resources.files("staticsched") / "examples"
    out = []
    for name in example_names():
        out.append(atomic_write_bytes(Path(directory) / name, (root / name).read_bytes()))
    return out
