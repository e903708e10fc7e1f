"""es-harness: compare evolution strategies with reinforcement learning, with evidence.

The Python API (:mod:`harness.api`): ``harness.run``, ``harness.sweep``,
``harness.load_runs``, ``harness.report`` and ``harness.load_policy``. Each is imported
on first use, so ``import harness`` stays cheap (a command that needs none of them, or a
worker process, pays nothing for them).

``harness.sweep`` and ``harness.report`` are also the sub-packages of those commands;
calling one calls :func:`harness.api.sweep` or :func:`harness.api.report`, and its
attributes are the sub-package's, so ``harness.sweep.load_sweep`` and
``mock.patch("harness.sweep.run_sweep")`` work as before.
"""

__version__ = "0.1.0"

# First of all: a Ctrl-C from here on, while the `harness` command starts, ends it with one
# line (see the module); a library import of the package is left alone.
import harness.quiet_start  # noqa: F401  # isort: skip

import os
import sys
import types
import warnings
from typing import Any

# MKL's default dispatch picks kernels by CPU and by each array's memory alignment, so on some
# CPUs (AMD EPYC) a torch policy rebuilt in another process (replay, enjoy) differed from the
# trained one in the last bit of some actions. Conditional numerical reproducibility (AUTO: the
# CPU's own code path; STRICT: matrix products independent of alignment) removes that, at no
# measured cost (docs/reproducibility.md). MKL reads it when it first runs, so it is set here,
# before anything imports torch; a value the user set wins.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

# Sacred 0.8.7 imports pkg_resources, which setuptools<81 deprecates loudly on every start.
warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)

__all__ = [
    "RunError",
    "RunResult",
    "SweepOutcome",
    "UsageError",
    "load_policy",
    "load_runs",
    "report",
    "run",
    "sweep",
]

#: Sub-packages that are also API functions of the same name.
_CALLABLE_PACKAGES = ("sweep", "report")
#: Other public names -> the module that defines them, imported on first use.
_LAZY = {
    "load_policy": "harness.replay",
    **{
        name: "harness.api"
        for name in __all__
        if name != "load_policy" and name not in _CALLABLE_PACKAGES
    },
}


class _CallablePackage(types.ModuleType):
    """A sub-package (``harness.sweep``) that, called, is the API function of its name."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from harness import api

        return getattr(api, self.__name__.rpartition(".")[2])(*args, **kwargs)


class _Package(types.ModuleType):
    """This package's module: makes ``sweep`` and ``report`` callable as they are imported
    (the import system sets them here as attributes, whoever imports them first)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _CALLABLE_PACKAGES and type(value) is types.ModuleType:
            value.__class__ = _CallablePackage
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> object:
    """The API's functions and types (``harness.run``, ...), imported on first use only."""
    import importlib

    if name in _CALLABLE_PACKAGES:
        return importlib.import_module(f"harness.{name}")
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    return getattr(importlib.import_module(module_name), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
