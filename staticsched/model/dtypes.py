"""Element dtypes as NumPy sees them: the one place a dtype name becomes a ``numpy.dtype``.

NumPy has no ``bfloat16``; ``ml_dtypes`` (a dependency of the package) registers one. It is
imported here, lazily, the first time a bfloat16 dtype is asked for, so that graphs without
bf16 never load it. Once imported, ``np.dtype("bfloat16")`` and ``array.astype("bfloat16")``
work everywhere.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from staticsched.errors import InputError

#: the dtypes a TaskGraph tensor may declare, with their unit roundoff (half the spacing of
#: the numbers at 1: 2^-(mantissa bits + 1))
COMPUTE_DTYPES: dict[str, float] = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24}


@cache
def numpy_dtype(name: str) -> np.dtype:
    """``np.dtype(name)``, with ``bfloat16`` from ``ml_dtypes`` (imported on first use).

    Raises
    ------
    InputError
        For a bfloat16 when ``ml_dtypes`` is not installed.
    TypeError
        For a name NumPy does not know (as ``np.dtype`` does: the readers report it where they
        check a program's dtypes).
    """
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError as exc:  # pragma: no cover - a dependency of the package
            raise InputError("dtype bfloat16 needs the 'ml_dtypes' package (pip install ml_dtypes)") from exc
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def itemsize(name: str) -> int:
    """Bytes of one element of dtype ``name``."""
    return numpy_dtype(name).itemsize


def is_float(dtype: np.dtype) -> bool:
    """Whether ``dtype`` holds floating-point values (NaN included): NumPy's own floats and
    ``ml_dtypes``' bfloat16 (whose ``kind`` is ``'V'``)."""
    return dtype.kind in "fc" or dtype.name == "bfloat16"


def as_dtype(values: np.ndarray, name: str) -> np.ndarray:
    """``values`` rounded once to dtype ``name`` (round to nearest even), C-contiguous."""
    return np.ascontiguousarray(np.asarray(values).astype(numpy_dtype(name)))


#: every float16 bit pattern's float32 value, by NumPy's own conversion: a lookup converts a
#: tile about twice as fast as ``astype``, which this NumPy does one element at a time (the
#: numeric replay converts ~10^9 fp16 elements on the 4096^3 chip)
_HALF_TO_FLOAT = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)


def as_float32(x: np.ndarray) -> np.ndarray:
    """``x.astype(np.float32)``, bit for bit (a new array), by table for float16."""
    if x.dtype == np.float16:
        # a uint16 always indexes the 2^16 entries: 'wrap' skips the bounds check (15% faster)
        return _HALF_TO_FLOAT.take(x.view(np.uint16), mode="wrap")
    return x.astype(np.float32)
