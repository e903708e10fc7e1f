"""The ``ray`` backend: one Ray actor per worker, on this machine or on a cluster.

* Connection: ``ray_address`` (``--ray-address``) or ``RAY_ADDRESS`` connects to a
  running cluster; otherwise a private local instance is started (never an
  unrelated instance that happens to run on this machine) and shut down on close.
* The noise table is put into Ray's object store once by the head. An actor's
  ``ray.get`` of it is a zero-copy, read-only view of the copy in its own node's
  object store, and Ray transfers an object to a node at most once: one copy per
  node, never one per actor or per task (:meth:`RayEvaluator.noise_placement`).
* Messages are the same :func:`~evaluation.worker.encode` bytes the other
  backends ship, passed to the actor as ``bytes``: the counters are exact payload sizes.
* Every actor builds a :class:`~evaluation.worker.TaskRunner`, which imports
  ``envs`` (and through :func:`envs.registry.make_env` registers the pybullet envs).
  On a cluster, the packages the caller names (``py_modules``; by default
  ``evaluation`` and ``envs``, the runner adds the algorithms whose replicas travel)
  are found by name and shipped as ``py_modules`` of the job's runtime env unless
  ``HARNESS_RAY_PY_MODULES=0``; this module imports none of them.
* Faults: a dead actor (process killed, node lost) surfaces as ``RayActorError``;
  its chunk is re-run on a fresh actor. An actor that cannot be placed within
  ``start_timeout_s`` (cluster gone, no free CPU) raises :class:`WorkerLostError`
  instead of waiting forever.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RaySystemError, RayTaskError

from envs.plugins import IMPORTS_ENV
from envs.policies import PolicySpec
from evaluation.backends import (
    EvaluatorSettings,
    PoolEvaluator,
    PoolWorker,
    WorkerLostError,
    sigint_held_from_children,
)
from evaluation.noise import NoiseSpec, NoiseTable
from evaluation.worker import CLOSE, TaskRunner

log = logging.getLogger(__name__)

#: Object store of a local instance: the noise table plus this much headroom.
OBJECT_STORE_HEADROOM = 64 * 1024 * 1024
#: Ray refuses object stores smaller than this.
OBJECT_STORE_MIN = 80 * 1024 * 1024

_DEAD = (RayActorError, RaySystemError)

#: What an actor imports by itself: the actor class and the protocol, and the envs.
WORKER_PY_MODULES = ("evaluation", "envs")

T = TypeVar("T")


def bounded(call: Callable[[], T], timeout_s: float) -> T | None:
    """``call()`` in a daemon thread; None if it has not returned within ``timeout_s``.

    Ray's control-plane calls (cluster state, GCS) block while the head is unreachable.
    """
    box: list[T] = []
    thread = threading.Thread(target=lambda: box.append(call()), daemon=True)
    thread.start()
    thread.join(timeout_s)
    return box[0] if box else None


class HeadMonitor:
    """Notices a lost cluster head (GCS) while actors still answer.

    A daemon thread asks the GCS for the cluster's resources every ``interval_s``; the
    evaluator checks :meth:`lost` while it waits. Ray itself terminates a driver whose
    GCS has been gone for 60 s, so this must raise well before that.
    """

    def __init__(self, interval_s: float = 2.0, timeout_s: float = 20.0) -> None:
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.last_ok = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="ray-head-monitor")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                ray.cluster_resources()
            except Exception:
                if not ray.is_initialized():
                    return
                continue
            self.last_ok = time.monotonic()

    def lost(self) -> str | None:
        """Why the cluster counts as lost, or None."""
        silent = time.monotonic() - self.last_ok
        if silent > self.timeout_s:
            return f"the Ray cluster's head (GCS) has not answered for {silent:.0f} s"
        return None

    def stop(self) -> None:
        self._stop.set()


def quiet_ray_logging() -> None:
    """Silence Ray's token-authentication notices (authentication itself stays on)."""
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(
        logging.ERROR
    )


def package_dir(name: str) -> str:
    """The folder of the top-level package ``name``, found without importing it."""
    spec = importlib.util.find_spec(name)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if len(locations) != 1:
        raise ValueError(f"cannot ship {name!r} to a Ray cluster: not a package in one folder")
    return str(Path(locations[0]))


class _NoDriverPaths(list[str]):
    """Ray's ``JobConfig._py_driver_sys_path``, kept empty: Ray would put the driver's working
    folder (and its script's) first on every worker's ``sys.path``, so a ``numpy.py`` planted
    where a command runs would be imported by each worker (docs/trust.md)."""

    def extend(self, paths: Any) -> None:
        pass


def _job_config() -> ray.job_config.JobConfig:
    job_config = ray.job_config.JobConfig()
    job_config._py_driver_sys_path = _NoDriverPaths()
    return job_config


def connect(
    address: str | None,
    num_cpus: int,
    object_store_bytes: int,
    py_modules: Sequence[str] = WORKER_PY_MODULES,
) -> bool:
    """Make sure this process is a Ray driver. Returns True if it started a local instance.

    An already initialised Ray (a test fixture, an outer application) is used as is.
    ``py_modules``: packages (by name) a cluster's workers receive with the job.
    """
    if ray.is_initialized():
        return False
    quiet_ray_logging()
    address = address or os.environ.get("RAY_ADDRESS") or None
    common: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
    if address is None:
        with sigint_held_from_children():  # Ray's own processes: Ctrl-C is the head's
            ray.init(
                address="local",
                num_cpus=num_cpus,
                object_store_memory=max(object_store_bytes, OBJECT_STORE_MIN),
                include_dashboard=False,
                job_config=_job_config(),
                **common,
            )
        return True
    probe_address(address)
    runtime_env: dict[str, Any] = {}
    if os.environ.get("HARNESS_RAY_PY_MODULES", "1") != "0":
        names = dict.fromkeys([*py_modules, *WORKER_PY_MODULES])  # ordered, no repeats
        runtime_env["py_modules"] = [package_dir(name) for name in names]
    if os.environ.get(IMPORTS_ENV):
        # the run's own modules: every actor imports them before it builds an env; they
        # must be installed on the cluster's machines (or be packages shipped above)
        runtime_env["env_vars"] = {IMPORTS_ENV: os.environ[IMPORTS_ENV]}
    try:
        ray.init(
            address=address,
            runtime_env=runtime_env or None,
            job_config=_job_config(),
            **common,
        )
    except (ConnectionError, RuntimeError, TimeoutError) as error:
        raise WorkerLostError(f"cannot connect to the Ray cluster at {address}: {error}") from None
    return False


def probe_address(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast on an unreachable ``host:port`` (``ray.init`` would retry for minutes)."""
    host, sep, port = address.rpartition(":")
    if "://" in address or not sep or not port.isdigit():
        return  # "auto", ray:// client addresses: leave them to Ray
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as error:
        raise WorkerLostError(
            f"cannot reach the Ray cluster at {address}: {error.strerror or error}"
        ) from None


class RayWorkerActor:
    """One evaluation worker: a TaskRunner fed encoded messages."""

    def __init__(
        self,
        worker_id: int,
        env_name: str,
        spec: dict[str, Any],
        noise_spec: NoiseSpec | None,
        noise_ref: list[Any] | None,
        reward_transform: str = "none",
    ) -> None:
        noise = None
        if noise_spec is not None and noise_ref is not None:
            # A zero-copy, read-only view of this node's copy in the object store.
            array = ray.get(noise_ref[0])
            noise = NoiseTable(noise_spec, array, None, owner=False)
        self.runner = TaskRunner(
            env_name,
            PolicySpec.from_dict(spec),
            noise,
            worker_id,
            reward_transform=reward_transform,
        )

    def handle(self, payload: bytes) -> bytes | None:
        """Serve one message; any error kills this actor, like a crashed process worker."""
        try:
            return self.runner.handle(payload)
        except Exception:
            import traceback

            traceback.print_exc(file=sys.stderr)
            sys.stderr.flush()
            os._exit(1)

    def info(self) -> dict[str, Any]:
        """Where this actor runs and how it holds the noise table."""
        noise = self.runner.noise
        array = noise.array if noise is not None else None
        return {
            "worker_id": self.runner.worker_id,
            "pid": os.getpid(),
            "node_id": ray.get_runtime_context().get_node_id(),
            "noise_zero_copy": None if array is None else not array.flags.owndata,
            "noise_read_only": None if array is None else not array.flags.writeable,
        }


_RemoteActor = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(RayWorkerActor)


class _RayWorker(PoolWorker):
    def __init__(self, actor: Any, worker_id: int) -> None:
        super().__init__(worker_id)
        self.actor = actor
        self.pending: Any = None  # ObjectRef of the outstanding request
        self.info: dict[str, Any] = {}


class RayEvaluator(PoolEvaluator):
    """Evaluation actors on Ray; see the module docstring."""

    def __init__(
        self,
        env_name: str,
        policy_spec: PolicySpec,
        noise_spec: NoiseSpec | None,
        num_workers: int,
        ray_address: str | None = None,
        chunks_per_worker: int = 4,
        max_restarts: int = 8,
        start_timeout_s: float = 120.0,
        poll_s: float = 1.0,
        head_timeout_s: float = 20.0,
        *,
        reward_transform: str = "none",
        py_modules: Sequence[str] = WORKER_PY_MODULES,
    ):
        super().__init__(
            env_name,
            policy_spec,
            noise_spec,
            num_workers,
            chunks_per_worker,
            max_restarts,
            reward_transform=reward_transform,
        )
        self.start_timeout_s = start_timeout_s
        self.poll_s = poll_s
        noise_bytes = noise_spec.size * 4 if noise_spec is not None else 0
        self._owns_ray = connect(
            ray_address,
            max(num_workers, os.cpu_count() or 1),
            noise_bytes + OBJECT_STORE_HEADROOM,
            py_modules,
        )
        self._spec_dict = policy_spec.to_dict()
        self.noise_ref: Any = None
        self.monitor = HeadMonitor(timeout_s=head_timeout_s)
        try:
            if noise_spec is not None:
                self.noise = NoiseTable.create(noise_spec)
                self.noise_ref = ray.put(self.noise.array)  # once; nodes fetch it once each
            self.workers = [self._launch(worker_id) for worker_id in range(num_workers)]
            self._await_ready(self.workers)
        except BaseException:
            self.close()
            raise

    @classmethod
    def create(cls, settings: EvaluatorSettings) -> RayEvaluator:
        """``workers`` actors on the instance or cluster at ``ray_address`` (or $RAY_ADDRESS)."""
        return cls(
            settings.env_name,
            settings.policy_spec,
            settings.noise_spec,
            settings.workers,
            settings.ray_address,
            reward_transform=settings.reward_transform,
            py_modules=settings.py_modules,  # connect() adds WORKER_PY_MODULES
        )

    # -- actors ------------------------------------------------------------------
    def _launch(self, worker_id: int) -> _RayWorker:
        noise = [self.noise_ref] if self.noise_ref is not None else None
        actor = _RemoteActor.remote(
            worker_id, self.env_name, self._spec_dict, self.noise_spec, noise, self.reward_transform
        )
        return _RayWorker(actor, worker_id)

    def _await_ready(self, workers: Sequence[_RayWorker]) -> None:
        """Block until every actor is placed and built, or raise WorkerLostError."""
        refs = {w.actor.info.remote(): w for w in workers}
        deadline = time.monotonic() + self.start_timeout_s
        ready: list[Any] = []
        not_ready = list(refs)
        while not_ready and time.monotonic() < deadline:
            self._check_head()
            done, not_ready = ray.wait(
                not_ready,
                num_returns=len(not_ready),
                # the head check above may have used up the rest: ray refuses a negative wait
                timeout=max(0.0, min(self.poll_s, deadline - time.monotonic())),
            )
            ready += done
        for ref in ready:
            try:
                refs[ref].info = ray.get(ref)
            except _DEAD as error:
                raise WorkerLostError(
                    f"Ray actor for worker {refs[ref].worker_id} died while starting: {error}"
                ) from None
        if not_ready:
            raise WorkerLostError(
                f"{len(not_ready)} of {len(refs)} Ray actors were not running after "
                f"{self.start_timeout_s:.0f} s: the cluster is gone or has no free CPU "
                f"(available: {_available()})"
            )

    def _start(self, worker_id: int) -> _RayWorker:
        worker = self._launch(worker_id)
        self._await_ready([worker])
        return worker

    def worker_pids(self) -> list[int]:
        """Operating-system ids of the actors' processes (fault tests kill these)."""
        return [int(w.info["pid"]) for w in self.workers]

    def placement(self) -> list[dict[str, Any]]:
        """Per worker: node id, pid, and whether its noise table is a zero-copy view."""
        return [dict(w.info) for w in self.workers]

    def noise_placement(self) -> list[str]:
        """Ids of the nodes whose object store holds a copy of the noise table."""
        if self.noise_ref is None:
            return []
        locations = ray.experimental.get_object_locations([self.noise_ref])
        return sorted(locations[self.noise_ref]["node_ids"])

    def _describe_death(self, worker: _RayWorker) -> str:
        info = worker.info
        return (
            f"Ray actor of worker {worker.worker_id} (pid {info.get('pid')}, "
            f"node {str(info.get('node_id'))[:12]})"
        )

    # -- transport ---------------------------------------------------------------
    def _post(self, worker: _RayWorker, payload: bytes) -> bool:
        # Calls from one caller run in order on an actor; a failure shows on the next request.
        worker.actor.handle.remote(payload)
        return True

    def _request(self, worker: _RayWorker, payload: bytes) -> bool:
        worker.pending = worker.actor.handle.remote(payload)
        return True

    def _check_head(self) -> None:
        reason = self.monitor.lost()
        if reason is not None:
            raise WorkerLostError(
                f"{reason}: the cluster is lost; resume the run from its "
                "last checkpoint once the cluster is back"
            )

    def _wait(self, busy: Sequence[_RayWorker]) -> list[tuple[Any, bytes | None]]:
        by_ref = {w.pending: w for w in busy if w.pending is not None}
        while True:
            self._check_head()
            ready, _ = ray.wait(list(by_ref), num_returns=1, timeout=self.poll_s)
            if ready:
                break
        replies: list[tuple[Any, bytes | None]] = []
        for ref in ready:
            worker = by_ref[ref]
            worker.pending = None
            try:
                replies.append((worker, ray.get(ref, timeout=self.start_timeout_s)))
            except _DEAD:
                replies.append((worker, None))
            except RayTaskError as error:  # the actor's process survived an error: treat as dead
                log.warning("worker %d failed: %s", worker.worker_id, error)
                replies.append((worker, None))
            except GetTimeoutError:
                raise WorkerLostError(
                    f"the reply of Ray worker {worker.worker_id} was ready but could not be "
                    f"fetched within {self.start_timeout_s:.0f} s: the cluster is unreachable"
                ) from None
        return replies

    def _stop(self, worker: _RayWorker, graceful: bool) -> None:
        try:
            if graceful:
                worker.actor.handle.remote(CLOSE)
            ray.kill(worker.actor, no_restart=True)
        except Exception:  # already gone, or Ray is down
            pass

    def close(self) -> None:
        monitor = getattr(self, "monitor", None)
        if monitor is not None:
            monitor.stop()
        for worker in self.workers:
            self._stop(worker, graceful=False)
        self.workers = []
        self.noise_ref = None
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
            self._owns_ray = False


def _available() -> str:
    try:
        resources = bounded(ray.available_resources, 5.0)
    except Exception as error:
        return f"unknown ({type(error).__name__})"
    if resources is None:  # the cluster's head does not answer
        return "unknown, the cluster's head does not answer"
    return ", ".join(
        f"{k}={v:g}" for k, v in sorted(resources.items()) if k in ("CPU", "GPU", "memory")
    )
