"""The steps of rendering in numpy, for an installation without the compiled ``_render``.

``setup.py`` builds ``_render.c`` where a C compiler is at hand and skips it where none is
(the extension is optional), so ``pip install .`` works anywhere. This module has the same
three functions with the same arguments, results and errors; the products then write the same
bytes, only slower (tests/products/test_render.py runs every rendering test on both).
"""

from __future__ import annotations

import numpy as np

_INT64_MIN = np.iinfo(np.int64).min


def _array(obj, itemsize: int, what: str) -> np.ndarray:
    a = np.asarray(obj) if not isinstance(obj, (bytes, bytearray, memoryview)) else \
        np.frombuffer(obj, dtype=np.uint8)
    if not a.flags.c_contiguous:
        raise BufferError(f"{what}: not C-contiguous")
    if a.itemsize != itemsize:
        raise TypeError(f"{what}: expected items of {itemsize} bytes, got {a.itemsize}")
    return a


def rows(blob, starts, columns, offsets, j, before, separator, after) -> bytes:
    """before + separator.join(the texts each row's columns pick) + after (see _render.c)."""
    text = _array(blob, 1, "blob").view(np.uint8).reshape(-1)
    at = _array(starts, 8, "starts").view(np.int64).reshape(-1)
    first = _array(offsets, 8, "offsets").view(np.int64).reshape(-1)
    columns = list(columns)
    if len(first) != len(columns):
        raise ValueError("one offset a column")
    picks, n_rows = [], None
    for c, column in enumerate(columns):
        col = _array(column, 4, "column").view(np.int32)
        if col.ndim == 2:
            if not 0 <= j < col.shape[0]:
                raise IndexError(f"point {j} outside the {col.shape[0]} points")
            col = col[j]
        elif col.ndim != 1:
            raise ValueError("a column is 1-D (row) or 2-D (point, row)")
        if n_rows is not None and len(col) != n_rows:
            raise ValueError("the columns have different numbers of rows")
        n_rows = len(col)
        picks.append(first[c] + col.astype(np.int64))
    n_rows = n_rows or 0
    n_texts = len(at) - 1
    if n_texts < 0 or at[0] != 0 or at[n_texts] != len(text):
        raise ValueError("starts must run from 0 to len(blob)")
    k = np.stack(picks, axis=1) if picks else np.empty((n_rows, 0), dtype=np.int64)
    bad = (k < 0) | (k >= n_texts)
    ok_k = np.where(bad, 0, k)
    bad |= (at[ok_k] < 0) | (at[ok_k + 1] < at[ok_k]) | (at[ok_k + 1] > len(text))
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise IndexError(f"row {r} of column {c}: no text {k[r, c]}")
    # Every row's texts, then the separator (as one more text) between rows.
    sep = np.frombuffer(bytes(separator), dtype=np.uint8)
    pool = np.concatenate([text, sep])
    pool_at = np.append(at, len(pool))
    order = np.concatenate([k, np.full((n_rows, 1), n_texts)], axis=1).reshape(-1)
    order = order[:-1] if n_rows else order[:0]
    lengths = pool_at[order + 1] - pool_at[order]
    ends = np.cumsum(lengths)
    gather = np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.int64)
    gather += np.repeat(pool_at[order] - (ends - lengths), lengths)
    return bytes(before) + pool[gather].tobytes() + bytes(after)


def codes(values, out, scale: float, truncate: bool) -> tuple[int, int, list[int]]:
    """out = rint(values * scale) (or trunc(values)) as int64, 0 where not finite; the least
    and greatest code of a finite value; the positions within 1e-6 of a tie (see _render.c)."""
    v = _array(values, 8, "values").view(np.float64).reshape(-1)
    dst = np.asarray(out)
    if dst.itemsize != 8 or dst.size != v.size:
        raise ValueError("out: one int64 a value")
    dst = dst.reshape(-1).view(np.int64)
    finite = np.isfinite(v)
    with np.errstate(invalid="ignore", over="ignore"):
        if truncate:
            s, ties = np.trunc(v), []
        else:
            s = v * scale
            near = finite & (np.abs(np.abs(s - np.trunc(s)) - 0.5) < 1e-6)
            ties = np.flatnonzero(near).tolist()
            s = np.rint(s)
        inside = finite & (np.abs(s) < 2.0 ** 63)
        k = np.where(inside, s, 0.0).astype(np.int64)
    k[finite & ~inside] = _INT64_MIN
    dst[:] = k
    if not finite.any():
        return 0, 0, ties
    return int(k[finite].min()), int(k[finite].max()), ties


def table_index(values, codes, lo: int, hi: int, index) -> bytes:
    """The distinct codes of the finite values (ascending int64, as bytes); in ``index``
    (point, time), each value's position among them, their number for a gap (see _render.c)."""
    v = _array(values, 8, "values").view(np.float64)
    c = _array(codes, 8, "codes").view(np.int64)
    idx = np.asarray(index)
    if v.ndim not in (1, 2) or c.size != v.size or idx.itemsize != 4 or idx.size != v.size:
        raise ValueError("values 1-D or 2-D, codes one int64 and index one int32 a value")
    if hi < lo or hi - lo > 2 ** 31 - 2:
        raise ValueError("lo .. hi must span less than 2**31 - 1 codes")
    c = c.reshape(v.shape)
    finite = np.isfinite(v)
    outside = finite & ((c < lo) | (c > hi))
    if outside.any():
        i = int(np.flatnonzero(outside.reshape(-1))[0])
        raise ValueError(f"code {int(c.reshape(-1)[i])} of value {i} outside {lo} .. {hi}")
    distinct = np.unique(c[finite])
    position = np.where(finite, np.searchsorted(distinct, c), len(distinct)).astype(np.int32)
    idx.reshape(-1).view(np.int32)[:] = (position.T if v.ndim == 2 else position).reshape(-1)
    return distinct.astype(np.int64).tobytes()
