"""products.base: the JSON texts of numbers, from the tables kept across calls. Every test runs
on the compiled steps (`_render`, built by setup.py) and on their numpy twin (`_render_numpy`,
used where no C compiler was at hand), which must give the same bytes and errors."""

from __future__ import annotations

import numpy as np
import pytest

from pointcast import _render as compiled, _render_numpy
from pointcast.products import base


@pytest.fixture(params=["compiled", "numpy"], autouse=True)
def _render(request, monkeypatch):
    """The rendering steps under test, also the ones products.base renders with."""
    steps = compiled if request.param == "compiled" else _render_numpy
    monkeypatch.setattr(base, "_render", steps)
    return steps


def _published(x: float, decimals: int | None) -> bytes:
    if not np.isfinite(x):
        return b"null"
    if decimals is None:
        return str(int(x)).encode()
    return repr(round(x, decimals) + 0.0).encode()


def test_numbers_are_python_rounded_whatever_the_tables_hold(monkeypatch):
    """The texts come from a table per precision that grows below and above as new values
    come; beyond its span they are formatted directly. Every text is Python's round of the
    value (the ties within a hair of .5 included), -0.0 as 0.0 and a gap as null."""
    monkeypatch.setattr(base, "_TEXTS", {})
    monkeypatch.setattr(base, "_TEXTS_SPAN", 5000)
    rng = np.random.default_rng(3)
    for scale in (1, 100, 0.01, 1000, 10, 1e5):  # ranges that grow the tables both ways, then overflow
        for decimals in (None, 0, 1, 2, 3):
            values = rng.normal(0, scale, (40, 6))
            values[rng.random(values.shape) < 0.05] = np.nan
            values[0, 0], values[1, 0] = -0.001, 984.85  # -0.0; a tie after scaling
            texts = base.numbers(values, decimals)
            for j in range(values.shape[1]):
                assert texts.at(j).tolist() == [_published(x, decimals) for x in values[:, j].tolist()]
    assert base._TEXTS and all(len(t) <= 5000 for _, t in base._TEXTS.values())


def test_numbers_of_any_layout_are_python_rounded():
    """The compiled codes take 1-D and 2-D values, float32 or float64, strided views,
    infinities and arrays of nothing but gaps; the texts are the same as value by value."""
    rng = np.random.default_rng(4)
    values = rng.normal(0, 30, (24, 9))
    values[::5, ::2], values[3], values[:, 4] = np.inf, -np.inf, np.nan
    ties = np.arange(-50, 50) / 10 + 0.05  # 0.05 steps: ties at one decimal, in binary a hair off
    for v in (values, values[:, ::2], values.astype(np.float32), values[5], ties,
              np.full((3, 2), np.nan), np.empty((0, 4)), np.empty(0)):
        for decimals in (None, 0, 1, 2):
            texts = base.numbers(v, decimals)
            columns = [v] if v.ndim == 1 else [v[:, j] for j in range(v.shape[1])]
            for j, column in enumerate(columns):
                assert texts.at(j).tolist() == [_published(x, decimals) for x in column.tolist()]


def test_the_compiled_codes_check_their_buffers(_render):
    values, codes = np.array([0.25, 3.0, np.nan, -1.04]), np.empty(4, dtype=np.int64)
    assert _render.codes(values, codes, 10.0, False) == (-10, 30, [0])  # 2.5 is a tie: Python decides
    assert codes.tolist() == [2, 30, 0, -10]
    assert _render.codes(values, codes, 1.0, True) == (-1, 3, [])
    assert codes.tolist() == [0, 3, 0, -1]
    with pytest.raises(ValueError, match="one int64 a value"):
        _render.codes(values, np.empty(3, dtype=np.int64), 10.0, False)
    with pytest.raises(TypeError, match="expected items of 8 bytes"):
        _render.codes(values.astype(np.float32), codes, 10.0, False)
    with pytest.raises(ValueError, match="one int64 a value"):
        _render.codes(values, codes.astype(np.int32), 10.0, False)
    _render.codes(values, codes, 10.0, False)
    codes[0] = 3
    index = np.empty(4, dtype=np.int32)
    assert np.frombuffer(_render.table_index(values, codes, -10, 30, index), np.int64).tolist() == [-10, 3, 30]
    assert index.tolist() == [1, 2, 3, 0]  # the gap: the number of distinct codes, the null's place
    with pytest.raises(ValueError, match="outside -9 .. 30"):
        _render.table_index(values, codes, -9, 30, index)
    with pytest.raises(ValueError, match="less than"):
        _render.table_index(values, codes, -10, 2**31, index)
    with pytest.raises(ValueError, match="1-D or 2-D"):
        _render.table_index(values.reshape(2, 1, 2), codes, -10, 30, index)
    with pytest.raises(ValueError, match="1-D or 2-D"):
        _render.table_index(values, codes, -10, 30, np.empty(3, dtype=np.int32))


def test_an_undecided_label_is_null():
    """A label the rules could not decide (None) is a JSON null, which the validation gate
    finds and refuses; pandas hands it back as NaN, and NaN is not JSON."""
    labels = np.array([["Rain", None], ["Fog", "Rain"]], dtype=object)
    texts = base.strings(labels)
    assert [texts.at(j).tolist() for j in range(2)] == [[b'"Rain"', b'"Fog"'], [b"null", b'"Rain"']]


def test_records_know_which_points_hold_a_null_and_render_whole_files(tmp_path):
    """A point's `Records.null` is whether its array's bytes hold a null (a gap in a number
    column, an undecided label); `put_with_records` puts the bytes `with_arrays` makes, and
    the staging tree takes that flag instead of scanning them."""
    from pointcast.publish import TreeWriter

    rng = np.random.default_rng(5)
    values = np.round(rng.normal(0, 10, (30, 8)), 2)
    values[4, 2] = values[29, 5] = np.nan
    labels = np.full((30, 8), "Rain", dtype=object)
    labels[0, 6] = None
    rows = base.Records({"datetime": base.strings([f"t{i}" for i in range(30)]),
                         "temp": base.numbers(values, 2), "weather_type": base.strings(labels)})
    assert rows.null.tolist() == [b"null" in rows.at(j) for j in range(8)]
    assert rows.null.tolist() == [j in (2, 5, 6) for j in range(8)]
    head = {"latitude": 50.1, "longitude": 8.6, "freq": "1H", "unit": {"temp": "°C"}}
    writer = TreeWriter(tmp_path)
    staged, memory = writer.files(), base.Files()
    for j in range(8):
        for files in (staged, memory):
            base.put_with_records(files, f"p{j}.json", head, "data", rows, j)
        assert memory[f"p{j}.json"] == base.with_arrays(head, data=rows.at(j))
    writer.finish()
    assert staged.with_null() == ["p2.json", "p5.json", "p6.json"]
    assert [staged[f"p{j}.json"] for j in range(8)] == [memory[f"p{j}.json"] for j in range(8)]
    base.put_with_records(memory, "none.json", {}, "data", base.Records({"datetime": base.strings([])}), 0)
    assert memory["none.json"] == b'{"data":[]}'


def test_the_compiled_rows_are_the_joins_of_the_picked_texts(_render):
    """`_render.rows` is ``before``, the rows (each the texts its columns pick, a 1-D column
    shared by every point, a 2-D one by point) joined by ``separator``, then ``after``,
    whatever the texts (empty ones, non-UTF-8) and rows (none, one); indices outside the
    texts, starts that do not span the buffer or columns that disagree are errors, never a
    read outside the buffer."""
    rows = _render.rows
    rng = np.random.default_rng(11)
    texts = [b"", b"{\"a\":1", b",\"b\":\xc2\xb0C", b"}", b"x" * 300]
    texts += [bytes(rng.integers(0, 256, n, dtype=np.uint8)) for n in rng.integers(0, 40, 50)]
    blob = b"".join(texts)
    starts = np.concatenate([[0], np.cumsum([len(t) for t in texts])]).astype(np.int64)

    def expected(columns, offsets, j):
        picked = [[texts[o + (c[r] if c.ndim == 1 else c[j, r])] for c, o in zip(columns, offsets, strict=True)]
                  for r in range(columns[0].shape[-1])]
        return b"<" + b"|".join(b"".join(row) for row in picked) + b">"

    for n_rows in (0, 1, 9):
        columns = [rng.integers(0, 20, n_rows, dtype=np.int32),
                   rng.integers(0, 30, (4, n_rows), dtype=np.int32),
                   np.full((4, n_rows), 4, dtype=np.int32)]
        offsets = np.array([0, 20, 0], dtype=np.int64)
        for j in range(4):
            assert rows(blob, starts, columns, offsets, j, b"<", b"|", b">") == expected(columns, offsets, j)
    column = np.array([0, 1], dtype=np.int32)
    for bad_offset in (len(texts) - 1, -1):
        with pytest.raises(IndexError):
            rows(blob, starts, [column], np.array([bad_offset], dtype=np.int64), 0, b"", b"", b"")
    with pytest.raises(IndexError):
        rows(blob, starts, [np.zeros((2, 2), dtype=np.int32)], np.zeros(1, dtype=np.int64), 2, b"", b"", b"")
    with pytest.raises(ValueError):
        rows(blob + b"tail", starts, [column], np.zeros(1, dtype=np.int64), 0, b"", b"", b"")
    descending = starts.copy()
    descending[2] = descending[1] - 1
    with pytest.raises(IndexError):
        rows(blob, descending, [column], np.zeros(1, dtype=np.int64), 0, b"", b"", b"")
    with pytest.raises(ValueError):
        rows(blob, starts, [column, column[:1]], np.zeros(2, dtype=np.int64), 0, b"", b"", b"")
    with pytest.raises(ValueError):
        rows(blob, starts, [column], np.zeros(2, dtype=np.int64), 0, b"", b"", b"")
    with pytest.raises(TypeError):
        rows(blob, starts, [column.astype(np.int64)], np.zeros(1, dtype=np.int64), 0, b"", b"", b"")
