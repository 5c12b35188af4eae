"""The HTTP source (``type = "http"``): real model runs from their upstream servers.

One generic source (``source.HttpSource``) reads each model's ``Upstream`` table
(``sources/ifs.py``, ``gfs.py``, ``msm.py``, ``icon.py``): mirrors in priority order and
layouts (URL templates) tried in order. For every model alike:

* **discover** (``discover``): walks back from the newest run due at ``now`` to the first run
  whose last step exists on a mirror; a run still being published is polled until the deadline
  (``wait_minutes``), then an older complete run is used, and the notes say so.
* **the files of a run** (``files``): the paths (and indexes) each layout names for the run's
  steps and the table's rows; on a one-file-per-field layout (DWD's trees) one file per field,
  and the cell-centre rows of ``ingest.CELL_CENTRE_ROWS`` (CLAT, CLON) at step 0.
* **model levels** (``levels``; ICON: rows with ``levels=RUN_LEVELS``): chosen per run from its
  HHL before the rest is fetched: HHL of half level 1 gives the number of levels, HHL from the
  surface up the heights, and U/V are asked for on the levels spanning the hub heights only.
* **byte ranges** (``index``): per file, the index (ECMWF ``.index`` JSON lines, wgrib2
  ``.idx``) is read and only the messages of the model's table are asked for, adjacent messages
  in one ``Range`` request. Files without an index (JMA's Lsurf files) are downloaded whole.
* **download** (``download``, over ``transport``): in passes over the connections, each download
  verified (its length the index's or ``Content-Length``, every message decoding with ecCodes),
  a failing file retried in the next pass after a backoff; a file every mirror answers "not
  found" for ``missing_minutes`` (3) is not published. **Optional rows** (``GribField.optional``):
  a file only optional rows read that no mirror has (404) is dropped at once with a note.
* **fetch** (``fetch``): the run into ``<cache>/http/<model>/<YYYYMMDDHH>/`` with a
  ``complete`` marker (a re-run sends no request; a change of the table re-downloads only the
  files whose selection changed); an unstructured grid's cell centres once per grid in
  ``<cache>/http/grids/<uuid>/``, returned first among the run's files, where ``ingest.decode``
  finds them; fields the tree does not publish dropped with a note, any other hole
  ``SourceUnavailable``.
* **progress** (``progress``): a progress bar on a terminal (rich), and a line in the log every
  tenth of the files (the flow's log when running in Prefect).

Configuration (``[sources.<id>]``, docs/config.md): ``mirrors`` replaces the table's mirrors
(base URLs), ``base_url`` is one mirror, ``extra_mirrors`` are tried after the table's;
``layouts.<name>.path`` / ``.index_path`` replace a layout's templates.
"""

from .discover import candidate_runs
from .download import check_grib, grib_lengths
from .files import RemoteFile, cell_centre_files, run_files
from .index import byte_ranges, parse_index, wanted_bytes
from .levels import LevelPlan, plan_model_levels
from .settings import HttpSettings
from .source import HttpSource
from .transport import USER_AGENT, BadDownload, SourceUnavailable

__all__ = [
    "BadDownload", "HttpSettings", "HttpSource", "LevelPlan", "RemoteFile", "SourceUnavailable",
    "USER_AGENT", "byte_ranges", "candidate_runs", "cell_centre_files", "check_grib",
    "grib_lengths", "parse_index", "plan_model_levels", "run_files", "wanted_bytes",
]
