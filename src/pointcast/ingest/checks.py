"""Which table row each message is, and whether it is what the row expects.

A message is a row's when ecCodes names it so (name, level, edition; for a row ecCodes names
"unknown", the parameter of one of its encodings) and its statistical processing fits the row
(``STEP_TYPES``). Its parameter and units are then checked against the row's encodings
(``judge``): a known alternative encoding is converted by its factor (IFS tcc in 0-1), and a
variable whose messages are not what the table says is refused with the reason (``select``).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace as dc_replace
from typing import Protocol

from ..gribtable import GribField, Processing
from .message import Message

log = logging.getLogger(__name__)


# The statistical processing a message must carry for each kind of row: it tells apart fields
# that ecCodes names alike (JMA's TCDC and APCP both decode as "unknown" at the surface).
STEP_TYPES = {
    Processing.INSTANT: {"instant"},
    Processing.CONSTANT: {"instant"},
    Processing.ACCUM_SINCE_START: {"accum"},
    Processing.AVG_SINCE_START: {"avg"},
    Processing.INTERVAL: {"max", "min"},
}


class Header(Protocol):
    """What a message is checked by: a decoded `Message`, or the header `pointcast inspect`
    reads."""

    @property
    def shortName(self) -> str: ...
    @property
    def typeOfLevel(self) -> str: ...
    @property
    def level(self) -> int: ...
    @property
    def stepType(self) -> str: ...
    @property
    def edition(self) -> int: ...
    @property
    def paramId(self) -> int: ...
    @property
    def units(self) -> str: ...
    @property
    def parameter(self) -> str: ...


def _names(row: GribField, msg: Header) -> bool:
    """Whether ``msg`` is, by its name and level, the field ``row`` names. A row ecCodes
    names nothing for ("unknown") names the parameters of its encodings."""
    return (row.shortName == msg.shortName and row.typeOfLevel == msg.typeOfLevel
            and (not row.levels or msg.level in row.levels)  # None, RUN_LEVELS: any
            and (row.edition is None or row.edition == msg.edition)
            and (row.shortName != "unknown" or not row.encodings
                 or any(e.parameter == msg.parameter for e in row.encodings)))


def matches(row: GribField, msg: Header) -> bool:
    """Whether ``msg`` is ``row``'s message: its name, level and statistical processing."""
    return _names(row, msg) and msg.stepType in STEP_TYPES[row.processing]


def judge(row: GribField, msg: Header) -> tuple[float, str | None]:
    """Whether a message ``row`` names is what the row expects: (the factor from its encoding
    to the row's first, None), or (0, why not) naming the key that differs. A row without
    encodings is not checked."""
    if not row.encodings:
        return 1.0, None
    for enc in row.encodings:
        if enc.paramId == msg.paramId and enc.parameter in (None, msg.parameter):
            if enc.units != msg.units:
                return 0.0, (f"units {msg.units!r} (paramId {msg.paramId}), the table expects "
                             f"{enc.units!r}")
            return enc.scale, None
    expected = " or ".join(f"{e.paramId}" + (f" ({e.parameter})" if e.parameter else "")
                           + f" in {e.units!r}" for e in row.encodings)
    return 0.0, (f"paramId {msg.paramId} ({msg.parameter}) in {msg.units!r}, the table "
                 f"expects paramId {expected}")


def select(messages: list[Message], fields: Sequence[GribField], model: str
            ) -> tuple[dict[GribField, list[Message]], list[str], int]:
    """The messages of each table row, the refusals and the number of messages no row names.

    A message a row names (``_names``) is the row's when its statistical processing fits
    (``STEP_TYPES``: GFS's instantaneous and averaged TCDC are two messages, one of them the
    row's) and its parameter and units are one of the row's encodings (``judge``; a
    known alternative is converted by its factor). Where a message fails that check, the
    whole variable is refused: none of its rows is decoded, and the reason (file, message,
    key) is logged and returned. A variable with no message of a fitting processing, where
    messages of that name exist, is refused in the same way."""
    rows_msgs: dict[GribField, list[Message]] = defaultdict(list)
    refused: dict[str, list[str]] = defaultdict(list)
    other_processing: dict[GribField, Message] = {}
    unused = 0
    for m in messages:
        hit = False
        for row in fields:
            if not _names(row, m):
                continue
            if m.stepType not in STEP_TYPES[row.processing]:
                other_processing.setdefault(row, m)
                continue
            hit = True
            factor, why = judge(row, m)
            if why is not None:
                refused[row.var].append(f"{m.where}: {why}")
            else:
                rows_msgs[row].append(m if factor == 1.0 else dc_replace(m, factor=factor))
        unused += not hit
    for row, m in other_processing.items():
        if row.var not in refused and not any(r.var == row.var for r in rows_msgs):
            kinds = sorted(STEP_TYPES[row.processing])
            refused[row.var].append(f"{m.where}: stepType {m.stepType!r} ({m.shortName}), the "
                                    f"table expects {' or '.join(map(repr, kinds))}")
    reasons = []
    for var, whys in refused.items():
        more = f" (and {len(whys) - 1} more messages)" if len(whys) > 1 else ""
        reasons.append(f"{var} refused: {whys[0]}{more}")
        log.warning("%s: %s", model or "run", reasons[-1])
        for row in [r for r in rows_msgs if r.var == var]:
            del rows_msgs[row]
    return rows_msgs, reasons, unused
