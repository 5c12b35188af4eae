"""Upstream indexes (ECMWF ``.index`` JSON lines, wgrib2 ``.idx``) -> the byte ranges of the
messages a model's table wants, adjacent messages in one range.
"""

from __future__ import annotations

import json
from typing import Any

from ..base import Layout, ModelSpec, Upstream
from .transport import BadDownload


def parse_index(text: str, kind: str) -> list[dict[str, Any]]:
    """Entries of an index with ``_offset`` and ``_length`` (None: to the end of the file)."""
    if kind == "ecmwf":
        entries = [json.loads(line) for line in text.splitlines() if line.strip()]
        for e in entries:
            e["_offset"], e["_length"] = int(e["_offset"]), int(e["_length"])
        return entries
    if kind == "wgrib2":
        entries = []
        for line in text.splitlines():
            if not line.strip():
                continue
            parts = line.split(":")
            if len(parts) < 6:
                raise BadDownload(f"not a wgrib2 inventory line: {line!r}")
            entries.append({"n": parts[0], "_offset": int(parts[1]), "date": parts[2][2:],
                            "param": parts[3], "level": parts[4], "time": parts[5]})
        # A field of a multi-field message ("3.1", "3.2": NCEP's UGRD and VGRD) shares its
        # message's offset: its range is the whole message, up to the next other offset.
        offsets = sorted({e["_offset"] for e in entries})
        ends = dict(zip(offsets, offsets[1:] + [None], strict=True))
        for e in entries:
            end = ends[e["_offset"]]
            e["_length"] = None if end is None else end - e["_offset"]
        return entries
    raise ValueError(f"unknown index format {kind!r}")


def byte_ranges(entries: list[dict[str, Any]]) -> list[tuple[int, int | None]]:
    """Adjacent messages merged into one range: [(offset, length or None for 'to the end')]."""
    out: list[tuple[int, int | None]] = []
    messages = {e["_offset"]: e["_length"] for e in entries}  # the fields of one message once
    for off, length in sorted(messages.items()):
        if out and out[-1][1] is not None and out[-1][0] + out[-1][1] == off:
            prev = out[-1]
            out[-1] = (prev[0], None if length is None else prev[1] + length)
        else:
            out.append((off, length))
    return out


def wanted_entries(model: ModelSpec, up: Upstream, layout: Layout,
                   index_text: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the entries of an index naming messages of ``model``'s table, all its entries)."""
    entries = parse_index(index_text, layout.index or "")
    if up.select is None:
        raise ValueError(f"{model.id}: layout {layout.name!r} has an index but the table "
                         f"has no select rule")
    wanted = [e for e in entries if any(up.select(e, row) for row in model.fields)]
    if not wanted:
        raise BadDownload("the index lists none of the table's fields")
    return wanted, entries


def wanted_ranges(model: ModelSpec, up: Upstream, layout: Layout,
                  index_text: str) -> list[tuple[int, int | None]]:
    """Byte ranges of the messages of ``model``'s table listed in an index."""
    return byte_ranges(wanted_entries(model, up, layout, index_text)[0])


def wanted_bytes(model: ModelSpec, up: Upstream, layout: Layout, index_text: str) -> int:
    """The bytes of the messages of ``model``'s table listed in an index; a message whose
    length the index leaves open (the last of a wgrib2 inventory) counted at the mean length
    of the others."""
    wanted, entries = wanted_entries(model, up, layout, index_text)
    known = {e["_offset"]: e["_length"] for e in entries if e["_length"] is not None}
    typical = sum(known.values()) // max(len(known), 1)
    lengths = {e["_offset"]: e["_length"] for e in wanted}  # the fields of one message once
    return sum(typical if n is None else n for n in lengths.values())
