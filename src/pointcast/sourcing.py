"""Which source a configured model's runs come from: the sample (``pointcast.sample``) or the
HTTP source (``pointcast.sources.remote``). Above both, since the sample imports the models
(``pointcast.sources``) it writes runs of; each is imported only when it is configured.
"""

from __future__ import annotations

from typing import Any, Protocol

from .sources.base import Source


class SourceConfig(Protocol):
    type: str
    options: dict[str, Any]


def make_source(name: str, cfg: SourceConfig, whole: bool = False) -> Source:
    """Build the source configured as ``[sources.<name>]``; ``whole``: without its
    `horizon_hours` cap, for a model that stands in for a dropped one to its horizon."""
    kind = getattr(cfg, "type", None)
    options = dict(getattr(cfg, "options", None) or {})
    if whole:
        options.pop("horizon_hours", None)
    if kind == "sample":
        from .sample import SampleSource

        return SampleSource.from_options(name, options)
    if kind == "http":
        from .sources.remote import HttpSource

        return HttpSource.from_options(name, options)
    raise ValueError(f"source {name!r}: unknown source type {kind!r} (known: 'sample', 'http')")
