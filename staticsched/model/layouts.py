"""GM tensor layouts: row-major ``ND`` and the Cube's fractal ``NZ``, byte for byte.

An ``NZ`` tensor of ``m x n`` elements is stored as ``n1 = ceil(n / 16)`` column blocks, each
``mp = ceil(m / 16) * 16`` rows of 16 elements: element ``(r, c)`` lives at flat index
``(c // 16) * mp * 16 + r * 16 + c % 16`` (``reference/layouts-and-conv.md`` §1: ND
``{m, n}`` is NZ ``{n1, m1m0, n0}``; the 16 x 16 fractal of 16-bit types, which the project
uses for every dtype). The padding rows and columns are real bytes of the tensor.

A GM access (a load or a store) reads or writes a region in the layout it *claims*: ``nz``
for the fractal layout, else row-major. The numeric replay keeps each tensor's bytes in its
declared layout (:class:`NZArray` for ``NZ``, a plain array for ``ND``), and an access whose
claim differs from the declaration reads or writes the flat bytes through the claimed mapping,
as the DMA would: scrambled values, never a silent conversion. A correct program's numbers are
those of the row-major replay exactly.

A DMA touches an ``NZ`` region in runs of ``rows x 16`` contiguous elements, one per column
block; runs shorter than the hardware's ``[cube] nz_run_bytes`` are priced at the derated rate,
as an ND -> NZ conversion's 32-B pieces are (:func:`nz_fragmented`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from staticsched.model.dtypes import itemsize as _itemsize

#: the fractal's side: 16 rows of 16 elements
FRACTAL = 16
LAYOUTS = ("ND", "NZ")

Region = tuple[tuple[int, int], tuple[int, int]]


def fractal_shape(m: int, n: int) -> tuple[int, int, int]:
    """``(n1, mp, 16)``: the column blocks, padded rows and fractal width of an ``m x n`` NZ tensor."""
    return (-(-n // FRACTAL), -(-m // FRACTAL) * FRACTAL, FRACTAL)


def nz_elements(m: int, n: int) -> int:
    """Elements an ``m x n`` NZ tensor occupies, padding included."""
    n1, mp, f = fractal_shape(m, n)
    return n1 * mp * f


def nz_bytes(m: int, n: int, dtype: str) -> int:
    """Bytes an ``m x n`` NZ tensor of ``dtype`` occupies, padding included."""
    return nz_elements(m, n) * _itemsize(dtype)


def nz_run_bytes(region: Region, dtype: str) -> int:
    """Bytes of one contiguous run of an NZ access of ``region``: its rows of one column block."""
    (r0, r1), _ = region
    return (r1 - r0) * FRACTAL * _itemsize(dtype)


def _flat_index(shape: tuple[int, int], region: Region, nz: bool) -> np.ndarray:
    """Flat indices of ``region``'s elements (rows x cols) in a tensor of logical ``shape``
    stored ``NZ`` (``nz``) or row-major."""
    (r0, r1), (c0, c1) = region
    m, n = shape
    rows = np.arange(r0, r1, dtype=np.int64)[:, None]
    cols = np.arange(c0, c1, dtype=np.int64)[None, :]
    if not nz:
        return rows * n + cols
    _, mp, f = fractal_shape(m, n)
    return (cols // f) * (mp * f) + rows * f + cols % f


class NZArray:
    """A GM tensor stored in the fractal layout: ``flat`` holds its bytes (padding included,
    poisoned until written), indexed by logical 2-D slices as a row-major array would be."""

    def __init__(self, shape: tuple[int, int], flat: np.ndarray) -> None:
        if flat.ndim != 1 or flat.size != nz_elements(*shape):
            raise ValueError(f"an NZ tensor of shape {list(shape)} holds {nz_elements(*shape)} "
                             f"elements, got {flat.size}")
        self.shape = (int(shape[0]), int(shape[1]))
        self.flat = flat

    @classmethod
    def poisoned(cls, shape: tuple[int, int], dtype: Any) -> NZArray:
        """All bytes 0xFF (NaN for floats), as fresh GM."""
        flat = np.empty(nz_elements(*shape), dtype=dtype)
        flat.view(np.uint8)[...] = 0xFF
        return cls(shape, flat)

    @classmethod
    def from_logical(cls, values: np.ndarray) -> NZArray:
        """The row-major ``values`` stored NZ (a weight converted at load time); zero padding."""
        values = np.asarray(values)
        m, n = values.shape
        out = cls(values.shape, np.zeros(nz_elements(m, n), dtype=values.dtype))
        out[0:m, 0:n] = values
        return out

    @property
    def dtype(self) -> np.dtype:
        return self.flat.dtype

    @property
    def ndim(self) -> int:
        return 2

    def _cube(self) -> np.ndarray:
        return self.flat.reshape(fractal_shape(*self.shape))

    def _region(self, key: Any) -> Region:
        if not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, slice) for k in key)):
            raise TypeError(f"an NZ tensor is indexed by two slices, got {key!r}")
        spans = []
        for k, size in zip(key, self.shape, strict=True):
            lo, hi, step = k.indices(size)
            if step != 1:
                raise TypeError("an NZ tensor is indexed by contiguous slices")
            spans.append((lo, max(lo, hi)))
        return (spans[0], spans[1])

    def __getitem__(self, key: Any) -> np.ndarray:
        (r0, r1), (c0, c1) = self._region(key)
        j0, j1 = c0 // FRACTAL, -(-c1 // FRACTAL)
        # (blocks, rows, 16) -> rows x (blocks * 16), then the columns asked for
        sub = self._cube()[j0:j1, r0:r1, :].transpose(1, 0, 2).reshape(r1 - r0, (j1 - j0) * FRACTAL)
        return sub[:, c0 - j0 * FRACTAL:c1 - j0 * FRACTAL]

    def __setitem__(self, key: Any, value: Any) -> None:
        region = self._region(key)
        idx = _flat_index(self.shape, region, nz=True)
        self.flat[idx] = np.broadcast_to(np.asarray(value, dtype=self.dtype), idx.shape)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[0:self.shape[0], 0:self.shape[1]]
        return out.astype(dtype) if dtype is not None else np.array(out)


def logical(arr: Any) -> np.ndarray:
    """A GM tensor's values row-major (an :class:`NZArray` gathered, an array as it is)."""
    return np.asarray(arr) if isinstance(arr, NZArray) else arr


def _flat(arr: Any) -> np.ndarray:
    return arr.flat if isinstance(arr, NZArray) else np.asarray(arr).reshape(-1)


def _storage(arr: Any) -> Any:
    # the replay hands a kind that writes GM deferring views of its tensors (``target`` is the
    # tensor itself); everything else gets the tensor
    return getattr(arr, "target", arr)


def read(arr: Any, region: Region, nz: bool) -> np.ndarray:
    """``region`` of GM tensor ``arr`` read in the layout the access claims (``nz``). A claim
    that matches the tensor's storage is a plain slice; one that does not reads the bytes at
    the claimed positions (past the tensor's end: NaN, as unwritten GM)."""
    arr = _storage(arr)
    (r0, r1), (c0, c1) = region
    if nz == isinstance(arr, NZArray):
        return arr[r0:r1, c0:c1]
    flat = _flat(arr)
    idx = _flat_index(tuple(arr.shape), region, nz)
    inside = idx < flat.size
    out = np.empty(idx.shape, dtype=flat.dtype)
    out.view(np.uint8)[...] = 0xFF
    out[inside] = flat[idx[inside]]
    return out


def write(arr: Any, region: Region, value: np.ndarray, nz: bool) -> None:
    """Write ``value`` into ``region`` of GM tensor ``arr`` in the claimed layout (``nz``); a
    mismatched claim scatters it to the claimed positions of the tensor's bytes (those past its
    end are lost). A deferring view (the replay's, for a kind that writes GM) records the
    write for the op's end."""
    defer = getattr(arr, "defer", None)
    if defer is not None and nz != isinstance(_storage(arr), NZArray):
        value = np.array(value, copy=True)
        defer(lambda target: write(target, region, value, nz))
        return
    (r0, r1), (c0, c1) = region
    if nz == isinstance(_storage(arr), NZArray):
        arr[r0:r1, c0:c1] = value
        return
    flat = _flat(arr)
    idx = _flat_index(tuple(arr.shape), region, nz)
    inside = idx < flat.size
    flat[idx[inside]] = np.broadcast_to(np.asarray(value, dtype=flat.dtype), idx.shape)[inside]
