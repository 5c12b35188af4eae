"""products.base: the JSON texts of numbers, from the tables kept across calls."""

from __future__ import annotations

import numpy as np

from pointcast.products import base


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


def test_an_undecided_label_is_null():
    """A label the rules could not decide (None) is a JSON null, which the validation gate
    finds and refuses; pandas hands it back as NaN, and NaN is not JSON."""
    labels = np.array([["Rain", None], ["Fog", "Rain"]], dtype=object)
    texts = base.strings(labels)
    assert [texts.at(j).tolist() for j in range(2)] == [[b'"Rain"', b'"Fog"'], [b"null", b'"Rain"']]
