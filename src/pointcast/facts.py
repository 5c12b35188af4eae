"""What a build slice found in what it built, handed to the validation gate (`pointcast.validate`).

No process holds a product's whole archive or the names of a run's million files: each build
slice finds these facts in its own archive rows and files (`validate.archive_facts`,
`validate.file_facts`), the products carry them (`products.base.ProductOutput`) and the gate
adds them up (`merged`). A leaf module: the products and the gate both read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class ArchiveFacts:
    """What validation needs to know of a product's archive rows, found where they are (a
    build slice, `validate.archive_facts`) and added up over the slices (`merged`): the points, and of
    every variable the number of NaN, where the first is, and the least and greatest value."""

    points: list[str] = field(default_factory=list)
    nan: dict[str, tuple[int, str]] = field(default_factory=dict)  # variable -> (count, first at)
    least: dict[str, float] = field(default_factory=dict)  # variable -> least value but NaN
    most: dict[str, float] = field(default_factory=dict)

    @classmethod
    def merged(cls, parts: list[ArchiveFacts]) -> ArchiveFacts:
        """The facts of consecutive slices' rows as one: the first NaN is the first slice's."""
        out = cls()
        for part in parts:
            out.points += part.points
            for name, (count, where) in part.nan.items():
                total, first = out.nan.get(name, (0, where))
                out.nan[name] = (total + count, first)
            for name, value in part.least.items():
                out.least[name] = min(value, out.least.get(name, value))
            for name, value in part.most.items():
                out.most[name] = max(value, out.most.get(name, value))
        return out


# JSON files parsed per product. A product renders every point's file from the same tables of
# value texts, so a file that does not parse, or has the wrong number of entries, or daily
# extremes off its hours, is a rendering fault that shows in any of them: files spread over
# the product's paths (every variant, first and last point) are parsed, plus every file
# holding a null. Reading back and parsing every file cost as much as rendering them.
PARSED_FILES = 200


@dataclass
class FileFacts:
    """What validation needs to know of a product's files, found where they are written (a
    build slice, `validate.file_facts`) and added up over the slices (`merged`): the expected files
    missing, the files holding a JSON null, and `PARSED_FILES` paths spread over the rest."""

    missing: list[str] = field(default_factory=list)
    with_null: list[str] = field(default_factory=list)
    spread: list[str] = field(default_factory=list)

    @classmethod
    def merged(cls, parts: list[FileFacts]) -> FileFacts:
        """The facts of several slices' files as one: their spreads spread again."""
        return cls([m for part in parts for m in part.missing],
                   [rel for part in parts for rel in part.with_null],
                   spread_paths(sorted({rel for part in parts for rel in part.spread})))


def spread_paths(rels: list[str]) -> list[str]:
    """`PARSED_FILES` of the sorted ``rels``, spread over them: the first, the last, and every
    variant (product, freq, height) between."""
    return [rels[i] for i in np.unique(np.linspace(0, len(rels) - 1, min(len(rels), PARSED_FILES))
                                       .round().astype(int))]
