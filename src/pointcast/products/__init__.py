"""Products: one module each, naming canonical variables, never sources.

A product turns the blended 15-minute point series into the API's JSON objects and a CF
dataset for the archive. The registry maps product ids (config `[products.<id>]`) to them.
"""

from __future__ import annotations

from collections.abc import Callable

from ..contract import BY_PRODUCT
from .base import Product, ProductOutput
from .eu_common import EuCommon
from .eu_wind import EuWind
from .global_wx import GlobalWx
from .japan import Japan

_KINDS: dict[str, Callable[[str, str], Product]] = {"eu": EuCommon, "wind": EuWind, "global": GlobalWx, "japan": Japan}
PRODUCTS: dict[str, Product] = {pid: _KINDS[op.answer](pid, op.path) for pid, op in BY_PRODUCT.items()}
"""Every product of the contract's operations (`contract.OPERATIONS`), with its path."""

__all__ = ["PRODUCTS", "Product", "ProductOutput"]
