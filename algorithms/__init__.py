"""Optimisers of policy parameters behind one interface, and their registry."""

from algorithms.base import Algorithm, RunContext, StepRecord
from algorithms.registry import algorithm_names, get_algorithm, register

__all__ = ["Algorithm", "RunContext", "StepRecord", "algorithm_names", "get_algorithm", "register"]
