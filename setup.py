"""Build the optional compiled kernels (streamembed/core/csrc/).

Everything else is declared in pyproject.toml. The extension is optional: without
a C compiler (or off x86) the install still succeeds and streamembed uses the
numpy paths of ``streamembed.core.place.projection``, ``restricted`` and ``block.solve``, which compute
the same numbers.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "streamembed.core._native",
            sources=[f"streamembed/core/csrc/{name}.c" for name in ("module", "projection", "secular", "block")],
            depends=["streamembed/core/csrc/native.h"],
            # -ffp-contract=fast: a*b + c becomes one FMA even if CFLAGS select an ISO C mode;
            # -fno-math-errno: sqrt compiles to the instruction (nothing reads errno)
            extra_compile_args=["-O3", "-ffp-contract=fast", "-fno-math-errno"],
            optional=True,
        )
    ]
)
