"""The compiled part of pointcast, steps of products.base's rendering (src/pointcast/_render.c);
everything else about the package is declared in pyproject.toml. The extension is optional:
without a C compiler the install goes on and products.base uses the same steps in numpy
(src/pointcast/_render_numpy.py)."""

from setuptools import Extension, setup

# -g0: no debug information, so the built extension holds no path of the machine that built it.
setup(ext_modules=[Extension("pointcast._render", ["src/pointcast/_render.c"],
                             extra_compile_args=["-O2", "-g0"], optional=True)])
