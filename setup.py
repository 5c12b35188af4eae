"""The compiled part of pointcast, the rendering of products.base.Records (src/pointcast/_render.c);
everything else about the package is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("pointcast._render", ["src/pointcast/_render.c"],
                             extra_compile_args=["-O2"])])
