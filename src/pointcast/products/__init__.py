"""Products: one module each, naming canonical variables, never sources.

A product turns the blended 15-minute point series into the spec's JSON objects and a CF
dataset for the archive. The registry maps product ids (config `[products.<id>]`) to them.
"""

from __future__ import annotations

from .base import Product, ProductOutput
from .eu_common import EuCommon
from .eu_wind import EuWind
from .global_wx import GlobalWx
from .japan import Japan

PRODUCTS: dict[str, Product] = {
    "eu-medium": EuCommon("eu-medium", "/V1/forecast/medium-range/common"),
    "eu-short": EuCommon("eu-short", "/V1/forecast/short-range/common"),
    "eu-wind": EuWind("eu-wind", "/V1/forecast/short-range/windpack"),
    "global": GlobalWx("global", "/api/v2/global/wx"),
    "japan": Japan("japan", "/api/v1/ss1wx"),
}

__all__ = ["PRODUCTS", "Product", "ProductOutput"]
