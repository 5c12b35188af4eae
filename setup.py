"""The compiled part of pointcast, steps of products.base's rendering (src/pointcast/_render.c);
everything else about the package is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("pointcast._render", ["src/pointcast/_render.c"],
                             extra_compile_args=["-O2"])])
