"""es-harness: compare evolution strategies with reinforcement learning, with evidence."""

__version__ = "0.1.0"

import warnings

# Sacred 0.8.7 imports pkg_resources, which setuptools<81 deprecates loudly on every start.
warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
