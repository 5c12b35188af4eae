"""Decode: GRIB files -> a canonical, dask-backed dataset (``decode``).

One pass reads only the message headers to learn what each message is and where it lies
(``scan``; ``message`` says what a message is); each message is checked against what its row of
the model's encoding table (``sources/<model>.py``) expects, and a variable whose messages are
not is refused with the reason (``checks``); the values are then read lazily, one dask task per
block of steps, straight from their byte ranges, accumulations and since-start averages
becoming interval values and units SI (``values``); ``dataset`` wires these into the dataset.

Two kinds of horizontal grid are read: regular lat/lon (dims ``lat``, ``lon``) and unstructured
grids (DWD's native ICON grids: dim ``cell`` with the coordinates ``clat``/``clon``), whose
cell centres come from the CLAT/CLON files the HTTP source keeps per grid and hands in with
every run on that grid (``sources/remote/``).
"""

from .checks import STEP_TYPES, judge, matches, select
from .dataset import INDEX_THREADS, LEVEL_DIMS, decode, decode_members
from .message import CELL_CENTRE_NAMES, CELL_CENTRE_ROWS, CellGridKey, DecodeError, GridKey, Message
from .scan import HEADER_BYTES, field_bytes, fields_of, forget_descriptions, index_file, plain_grib
from .values import BLOCK_BYTES, MAX_BLOCK_STEPS, MISSING, read_values

__all__ = [
    "BLOCK_BYTES", "CELL_CENTRE_NAMES", "CELL_CENTRE_ROWS", "CellGridKey", "DecodeError", "GridKey",
    "HEADER_BYTES", "INDEX_THREADS", "LEVEL_DIMS", "MAX_BLOCK_STEPS", "MISSING", "Message",
    "STEP_TYPES", "decode", "decode_members", "field_bytes", "fields_of", "forget_descriptions", "index_file",
    "judge", "matches", "plain_grib", "read_values", "select",
]
