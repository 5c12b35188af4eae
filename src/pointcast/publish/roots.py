"""Which backend an output root has: above `backend` and the backends that implement it, so
that neither imports the other's module back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .backend import Backend, is_url


def backend_for(root: Any) -> Backend:
    """The backend of an output root: a URL's through fsspec, a path's on the local disk."""
    # Imported here, not at the top: a local root never needs fsspec.
    if is_url(root):
        from .objectstore import ObjectStoreBackend
        return ObjectStoreBackend(root)
    from .local import LocalBackend
    return LocalBackend(Path(root))
