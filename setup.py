"""Build the Cython core. Metadata lives in pyproject.toml; this file only declares extensions."""
import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

ext_names = ["kernels", "projection", "batch", "merge", "keys", "zcodecs", "lockspace"]
extensions = [
    Extension(
        f"chunkstore._core.{name}",
        [f"chunkstore/_core/{name}.pyx"],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3"],
    )
    for name in ext_names
] + [
    Extension(f"chunkstore.storage.{name}", [f"chunkstore/storage/{name}.pyx"],
              extra_compile_args=["-O2"])
    for name in ("_fileio", "_filewrite")
] + [
    Extension("chunkstore.aio._handoff", ["chunkstore/aio/_handoff.pyx"], extra_compile_args=["-O2"])
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    )
)
