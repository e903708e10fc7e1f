"""Evaluation protocol and backends: what a worker is asked and what it answers."""

from harness.parallel.protocol import (
    Broadcast,
    EvalResult,
    EvalTask,
    GenerationStats,
    Replica,
    ReplicaRef,
)

__all__ = ["Broadcast", "EvalResult", "EvalTask", "GenerationStats", "Replica", "ReplicaRef"]
