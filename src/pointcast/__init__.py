"""pointcast: precomputed point weather forecasts from NWP model runs."""

import os
import sys


def _import_pyproj() -> None:
    """Import pyproj bound to the PROJ its own wheel bundles, whether or not ecCodes came first.

    pyproj's wheel and the eckitlib wheel under ecCodes (libeccodes needs libeckit_geo, which
    needs PROJ) each bundle a libproj and a libsqlite3: different files, the same symbols.
    ecCodes' loader (findlibs) opens every eckit library with RTLD_GLOBAL, so after
    ``import eccodes`` a pyproj imported as usual binds its PROJ calls, and its own libproj's
    C++ statics, to eckit's copy (LD_DEBUG=bindings). eckit's PROJ 9.8 then refuses pyproj's
    9.5 proj.db (pyproj: "unable to set PROJ database path"; EPSG:3035 cannot be built), and at
    exit both copies destroy the same static objects (a double free; status 139).
    RTLD_DEEPBIND (glibc) makes pyproj's extension modules, and the libraries they load, look
    symbols up in their own dependencies before the global scope. ``import pyproj`` loads every
    extension module pyproj has (/proc/self/maps), so the flag is needed only that long.
    Importing pyproj before ecCodes is not enough: analysts import ecCodes first.
    """
    flags = sys.getdlopenflags()
    sys.setdlopenflags(flags | getattr(os, "RTLD_DEEPBIND", 0))
    try:
        import pyproj  # noqa: F401
    finally:
        sys.setdlopenflags(flags)


_import_pyproj()

__version__ = "0.1.0"
