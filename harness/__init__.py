"""es-harness: compare evolution strategies with reinforcement learning, with evidence."""

__version__ = "0.1.0"

import warnings

# Sacred 0.8.7 imports pkg_resources, which setuptools<81 deprecates loudly on every start.
warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)

__all__ = ["load_policy"]


def __getattr__(name: str) -> object:
    """``harness.load_policy`` (:mod:`harness.replay`), imported on first use only."""
    if name == "load_policy":
        from harness.replay import load_policy

        return load_policy
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
