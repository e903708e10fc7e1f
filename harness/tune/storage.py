"""Where studies live: optuna's RDB storage (any SQLAlchemy URL), checked before use, and
one lock per study so that processes sharing it start exactly the trials asked for.

Default: a SQLite file in the runs directory, ``RUNS_DIR/_tune/tune.db``, the file
``optuna-dashboard`` opens for a live view. Any SQLAlchemy URL works
(``postgresql+psycopg2://user@host/db``, ``mysql+pymysql://...``): several ``harness
tune`` processes, on one machine or many, then share one study.

Liveness. Each running trial's heartbeat is recorded in the storage every
:data:`HEARTBEAT_S` seconds (optuna's heartbeat); a trial whose process died without
a word (SIGKILL, a lost machine) is marked FAIL by the next process that starts a trial
once its heartbeat is :data:`GRACE_S` seconds old, and queued again with the same
parameters (optuna's ``RetryHeartbeatStaleTrialCallback``). Ctrl-C needs no wait: the
interrupted process marks its own trials at once (:mod:`harness.tune.study`).

The study lock serialises the decision "is another trial needed?" with the asking of
it: a ``fcntl`` lock on ``FILE.lock`` beside a SQLite file, a session-level
``pg_advisory_lock`` on PostgreSQL. Other databases get no lock: two processes may
then start one trial more than ``--trials`` between them. The same lock (another name)
lets one process at a time create optuna's tables in a new database: two processes
starting at once on an empty PostgreSQL database otherwise race on them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import warnings
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.commands import UsageError

if TYPE_CHECKING:
    from optuna.storages import RDBStorage

#: Folder of a runs directory holding the studies' storage and outputs.
TUNE_DIR = "_tune"
DEFAULT_DB = "tune.db"
#: Seconds between heartbeats of a running trial, and the age at which one counts as dead.
HEARTBEAT_S = 10
GRACE_S = 60
#: Seconds to wait for a database server that does not answer.
CONNECT_TIMEOUT_S = 10


def default_url(runs_dir: Path) -> str:
    """The SQLite file of a runs directory (an absolute path: the URL says where it is)."""
    return f"sqlite:///{(runs_dir / TUNE_DIR / DEFAULT_DB).absolute()}"


def shown(url: str) -> str:
    """The URL with its password hidden, for messages and records."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def sqlite_path(url: str) -> Path | None:
    """The database file of a ``sqlite:///`` URL (None: another database, or in memory)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(str(parsed.database))


def _refuse(url: str, reason: Any) -> UsageError:
    first = next((line.strip() for line in str(reason).splitlines() if line.strip()), "")
    return UsageError(f"storage {shown(url)!r} is unreachable: {first or type(reason).__name__}")


def check_url(url: str, creating: bool) -> None:
    """Refuse a storage URL that cannot be opened, writing nothing.

    ``creating``: a SQLite file that does not exist yet may be created (the default
    storage); otherwise it must exist. A server is asked for one connection.
    """
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise UsageError(
            f"storage {url!r} is not a database URL (e.g. sqlite:///runs/_tune/tune.db or "
            "postgresql+psycopg2://user@host/db)"
        ) from None
    path = sqlite_path(url)
    if path is not None:
        if not path.exists() and not creating:
            raise UsageError(f"storage {shown(url)!r}: no such database file {str(path)!r}")
        return
    try:
        engine = create_engine(parsed, **_engine_kwargs(parsed.get_backend_name()))
    except (NoSuchModuleError, ImportError, ArgumentError) as error:
        raise _refuse(url, error) from None
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError as error:
        raise _refuse(url, getattr(error, "orig", None) or error) from None
    finally:
        engine.dispose()


def _engine_kwargs(backend: str) -> dict[str, Any]:
    if backend == "postgresql":
        return {"connect_args": {"connect_timeout": CONNECT_TIMEOUT_S}}
    return {}


def open_storage(url: str) -> RDBStorage:
    """optuna's RDB storage at ``url`` with heartbeats and retries of dead trials.

    Raises :class:`UsageError` (one line) when it cannot be opened.
    """
    import optuna
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    path = sqlite_path(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    kwargs = _engine_kwargs(make_url(url).get_backend_name())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=3)
        try:
            # one process at a time creates the tables: two at once on a new database race
            with _locked(url, "tables"):
                return optuna.storages.RDBStorage(
                    url,
                    engine_kwargs=kwargs,
                    heartbeat_interval=HEARTBEAT_S,
                    grace_period=GRACE_S,
                    heartbeat_stale_trial_callback=retry,
                )
        except (SQLAlchemyError, ImportError) as error:
            raise _refuse(url, getattr(error, "orig", None) or error) from None


def lock_key(name: str) -> int:
    """A signed 64-bit key of a lock's name (PostgreSQL's advisory locks take a bigint)."""
    digest = hashlib.sha256(f"harness-tune:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@lru_cache(maxsize=8)
def _lock_engine(url: str) -> Any:
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from sqlalchemy.pool import NullPool

    parsed = make_url(url)
    return create_engine(parsed, poolclass=NullPool, **_engine_kwargs(parsed.get_backend_name()))


@contextlib.contextmanager
def study_lock(url: str, study_name: str) -> Iterator[None]:
    """Hold the study's lock (see the module docstring) for the duration of the block."""
    with _locked(url, f"study:{study_name}"):
        yield


@contextlib.contextmanager
def _locked(url: str, name: str) -> Iterator[None]:
    """An exclusive lock named ``name`` among the processes sharing the storage at ``url``."""
    path = sqlite_path(url)
    if path is not None:
        with open(f"{path}.lock", "a+") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    if make_url(url).get_backend_name() != "postgresql":
        yield
        return
    key = lock_key(name)
    with _lock_engine(url).connect() as connection:
        connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": key})
        connection.commit()
        try:
            yield
        finally:
            connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
            connection.commit()
