"""Short environment names, their gymnasium ids, and quiet environment construction.

``make_env("AntBulletEnv")`` and ``make_env("AntBulletEnv-v0")`` build the same environment;
any id registered with gymnasium passes through unchanged. Names are validated before anything
expensive happens, and an unknown name raises :class:`UnknownEnvError` whose message is a single
line listing the closest matches.

The known environments are one table, :data:`ENVS`, one :class:`EnvEntry` row each: adding an
env is adding a row (its per-env hyperparameters and default policy go in
``experiments/defaults.yaml``, keyed by its short name or gymnasium id).
"""

from __future__ import annotations

import contextlib
import ctypes
import difflib
import io
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from envs.plugins import PluginImportError, import_from_environment, import_modules
from envs.wrappers import ZeroVelocityPendulum

__all__ = [
    "ENVS",
    "ENV_ALIASES",
    "EnvEntry",
    "UnknownEnvError",
    "canonical_env_name",
    "list_envs",
    "make_env",
    "quiet_output",
    "register_pybullet_envs",
    "resolve_env_id",
]

Wrapper = Callable[[gym.Env[Any, Any]], gym.Env[Any, Any]]


@dataclass(frozen=True)
class EnvEntry:
    """One environment known by a short name."""

    #: the short name (``harness run --env NAME``; case-insensitive)
    name: str
    #: the gymnasium id it builds
    gym_id: str
    #: one line for ``harness list``: what it is, observation and action sizes, episode length
    notes: str
    #: applied to the gymnasium env (a variant of a registered task, e.g. partially observed)
    wrapper: Wrapper | None = None
    #: keyword arguments of ``gym.make`` (a variant the task itself offers)
    make_kwargs: tuple[tuple[str, Any], ...] = ()

    def make(self, render_mode: str | None = None) -> gym.Env[Any, Any]:
        """Build this environment (the gymnasium id, quietly, then the wrapper if any)."""
        env = _make_id(self.gym_id, render_mode, dict(self.make_kwargs))
        return env if self.wrapper is None else self.wrapper(env)


#: Every environment known by a short name, in ``harness list`` order.
ENVS: tuple[EnvEntry, ...] = (
    EnvEntry(
        "AntBulletEnv",
        "AntBulletEnv-v0",
        "PyBullet quadruped locomotion; obs 28, 8 continuous actions, 1000 steps",
    ),
    EnvEntry(
        "LunarLanderContinuous",
        "LunarLanderContinuous-v3",
        "Box2D lander; obs 8, 2 continuous actions, 1000 steps",
    ),
    EnvEntry(
        "PendulumPO",
        "Pendulum-v1",
        "Pendulum swing-up with angular velocity zeroed (partially observed); "
        "obs 3, 1 continuous action, 200 steps",
        wrapper=ZeroVelocityPendulum,
    ),
    EnvEntry("Pendulum", "Pendulum-v1", "Pendulum swing-up; obs 3, 1 continuous action, 200 steps"),
    EnvEntry("CartPole", "CartPole-v1", "Pole balancing; obs 4, 2 discrete actions, 500 steps"),
    EnvEntry(
        "Ant",
        "Ant-v5",
        "MuJoCo quadruped locomotion; obs 105, 8 continuous actions, 1000 steps",
    ),
    EnvEntry(
        "AntNoContact",
        "Ant-v5",
        "MuJoCo Ant-v5 without its 78 contact-force observations (Ant-v4's default); "
        "obs 27, 8 continuous actions, 1000 steps",
        make_kwargs=(("include_cfrc_ext_in_observation", False),),
    ),
    EnvEntry(
        "Humanoid",
        "Humanoid-v5",
        "MuJoCo humanoid locomotion; obs 348, 17 continuous actions, 1000 steps",
    ),
    EnvEntry(
        "HalfCheetah",
        "HalfCheetah-v5",
        "MuJoCo planar cheetah running; obs 17, 6 continuous actions, 1000 steps",
    ),
)
#: Short name -> its row.
BY_NAME: dict[str, EnvEntry] = {entry.name: entry for entry in ENVS}
if len(BY_NAME) != len(ENVS):
    raise ValueError("envs.registry.ENVS names an environment twice")
#: Short name -> gymnasium id.
ENV_ALIASES: dict[str, str] = {entry.name: entry.gym_id for entry in ENVS}

_pybullet_registered = False


class UnknownEnvError(ValueError):
    """An environment name that is neither a short name nor a registered gymnasium id."""

    def __init__(self, name: str, suggestions: list[str], reason: str | None = None) -> None:
        """Build the one-line message naming ``name`` and the closest known names
        (``reason``: why, where it is not a name nothing registered)."""
        self.name = name
        self.suggestions = suggestions
        known = ", ".join(ENV_ALIASES)
        hint = f"; did you mean: {', '.join(suggestions)}?" if suggestions else ";"
        if reason is not None:
            super().__init__(f"unknown environment {name!r}: {reason}")
        else:
            super().__init__(
                f"unknown environment {name!r}{hint} known short names: {known}; an env of "
                "your own: --import MODULE, or MODULE:ID"
            )


@contextlib.contextmanager
def quiet_output(stderr: bool = False) -> Iterator[None]:
    """Silence stdout (and optionally stderr) at the file-descriptor level.

    C extensions such as pybullet ``printf`` straight to file descriptor 1, which
    ``contextlib.redirect_stdout`` cannot catch, so the descriptors themselves are pointed at
    ``/dev/null`` for the duration and C stdio buffers are flushed before they are restored (a
    fully buffered C ``stdout`` would otherwise write the text later, into the real output).
    Python-level ``sys.stdout``/``sys.stderr`` are redirected as well.
    """
    fds = [1, 2] if stderr else [1]
    _flush_all()
    saved: list[tuple[int, int]] = []
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in fds:
            saved.append((fd, os.dup(fd)))
            os.dup2(devnull, fd)
        with contextlib.ExitStack() as stack:
            stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
            if stderr:
                stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
            yield
    finally:
        _flush_all()
        for fd, copy in saved:
            os.dup2(copy, fd)
            os.close(copy)
        os.close(devnull)


def _flush_all() -> None:
    """Flush Python's and C's standard output buffers."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        if stream is not None:
            with contextlib.suppress(Exception):
                stream.flush()
    if _LIBC is not None:
        _LIBC.fflush(None)


def _load_libc() -> Any:
    """Return the C library (for ``fflush``), or None where it cannot be loaded."""
    try:
        libc = ctypes.CDLL(None)
        libc.fflush  # noqa: B018  (probe the symbol)
    except (OSError, AttributeError, TypeError):
        return None
    return libc


_LIBC = _load_libc()


def register_pybullet_envs() -> None:
    """Register the PyBullet environments (``AntBulletEnv-v0``, ...) with gymnasium, quietly.

    Imports ``pybullet_envs_gymnasium`` and ``pybullet`` (whose import prints a build banner
    from C). Idempotent and cheap after the first call; worker processes call it before
    building a Bullet environment.
    """
    global _pybullet_registered
    if _pybullet_registered:
        return
    with quiet_output(stderr=True):
        import pybullet  # noqa: F401
        import pybullet_envs_gymnasium  # noqa: F401
    _pybullet_registered = True


def _needs_pybullet(env_id: str) -> bool:
    return "Bullet" in env_id


def _alias_key(name: str) -> str | None:
    """Return the short name matching ``name`` exactly or case-insensitively, else None."""
    if name in ENV_ALIASES:
        return name
    lowered = name.lower()
    for alias in ENV_ALIASES:
        if alias.lower() == lowered:
            return alias
    return None


def _suggest(name: str) -> list[str]:
    """Closest short names and registered ids to ``name`` (case-insensitive)."""
    candidates = list(ENV_ALIASES) + sorted(gym.registry)
    by_lower: dict[str, str] = {}
    for cand in candidates:
        by_lower.setdefault(cand.lower(), cand)
    matches = difflib.get_close_matches(name.lower(), list(by_lower), n=4, cutoff=0.6)
    return [by_lower[m] for m in matches]


def _import_env_module(name: str) -> str:
    """For gymnasium's ``module:Id`` form, import the module (it registers the id); the id."""
    module, sep, env_id = name.rpartition(":")
    if not sep:
        return name
    if not module or not env_id:
        raise UnknownEnvError(name, [])
    try:
        import_modules([module], what=f"env {name}")
    except PluginImportError as error:
        raise UnknownEnvError(name, [], str(error)) from None
    return env_id


def resolve_env_id(name: str) -> str:
    """Map a short name, a registered gymnasium id or ``module:Id`` to the gymnasium id.

    Modules the run imports (:mod:`envs.plugins`) are imported first. Raises
    :class:`UnknownEnvError` when ``name`` is none of those.
    """
    import_from_environment()
    name = _import_env_module(name)
    alias = _alias_key(name)
    if alias is not None:
        return ENV_ALIASES[alias]
    if _needs_pybullet(name):
        register_pybullet_envs()
    if name in gym.registry:
        return name
    if not _pybullet_registered:
        register_pybullet_envs()  # so that suggestions include the Bullet ids
    raise UnknownEnvError(name, _suggest(name))


def canonical_env_name(name: str) -> str:
    """Return the short name for ``name`` if there is one, else its gymnasium id.

    ``"antbulletenv"`` and ``"AntBulletEnv-v0"`` both give ``"AntBulletEnv"``; ``"Pendulum-v1"``
    gives ``"Pendulum"`` (never the wrapped ``"PendulumPO"``). Raises :class:`UnknownEnvError`.
    """
    alias = _alias_key(name)
    if alias is not None:
        return alias
    env_id = resolve_env_id(name)
    for entry in ENVS:
        if entry.gym_id == env_id and entry.wrapper is None:
            return entry.name
    return env_id


def list_envs() -> list[tuple[str, str, str]]:
    """Known short names as ``(short name, gymnasium id, one-line description)``."""
    return [(entry.name, entry.gym_id, entry.notes) for entry in ENVS]


def make_env(name: str, *, render_mode: str | None = None) -> gym.Env[Any, Any]:
    """Build the environment for a short name or gymnasium id.

    The name is validated first (:class:`UnknownEnvError`). Bullet environments are registered
    on demand and built with their ``argv[0]=`` chatter suppressed: pybullet prints it when the
    physics client connects, which happens on the first ``reset``, so a first (unseeded) reset
    is done here, silenced. Callers reset with their own seed before use. Short names with a
    wrapper (``PendulumPO``) or ``gym.make`` arguments (``AntNoContact``) get them applied.
    """
    env_id = resolve_env_id(name)  # imports the run's modules and a module:Id's module
    alias = _alias_key(name.rpartition(":")[2])
    if alias is not None:
        return BY_NAME[alias].make(render_mode)
    return _make_id(env_id, render_mode)


def _make_id(
    env_id: str, render_mode: str | None, make_kwargs: dict[str, Any] | None = None
) -> gym.Env[Any, Any]:
    """``gym.make(env_id)``; Bullet ids registered first and built quietly (see make_env)."""
    kwargs = dict(make_kwargs or {})
    if render_mode is not None:
        # only when asked: gym.make passes it on, and an env's __init__ need not take it
        kwargs["render_mode"] = render_mode
    if _needs_pybullet(env_id):
        register_pybullet_envs()
        with quiet_output():
            env = gym.make(env_id, **kwargs)
            env.reset()
        return env
    return gym.make(env_id, **kwargs)
