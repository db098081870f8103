"""What every batch job shares (``embed_file``, ``ocr_dir``, ``transcribe_dir``): its settings, its
servers for the run's lifetime, the model they serve, and the report of each server in the manifest (its
lock, fingerprint check and checkpoint: :mod:`vllm_tasks.jobs.state`).

A job starts on the servers that answer: one that cannot be reached is set aside with a warning and gets
work once it is back (:class:`~vllm_tasks.jobs.replicas.ReplicaPool`). A server that was set aside is
checked again before its next request (:func:`recheck_model`); ``embed_file`` also checks the model of
every server that embedded a chunk, with the probe text, before the chunk is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from ..adaptive import Concurrency
from ..errors import JobMismatch, ReplicaMismatch, is_about
from ..types.server import ServerInfo
from ..validation import concurrency_setting, positive_number
from .replicas import Replica, ReplicaPool, Servers, close_made, logger, make_replicas
from .state import PROBE_MIN_COSINE, cosine

Describe = Callable[[Replica, ServerInfo], Awaitable[dict[str, Any]]]
"""What a job records of the model a replica serves: at least ``model`` (its name) and ``root`` (its
weights); ``probe`` (a vector for a fixed text) when the job can ask for one."""


@dataclass(frozen=True)
class JobSettings:
    """The options every job takes that do not change its output, checked when made.

    Raises:
        InvalidInputError: a ``concurrency`` that is not positive (or ``"auto"``), a number of seconds
            that is not positive.
    """

    concurrency: Concurrency
    show_progress: bool
    progress_interval: float
    retry_replica_after: float
    give_up_after: float

    def __post_init__(self) -> None:
        concurrency_setting("concurrency", self.concurrency)
        for name in ("progress_interval", "retry_replica_after", "give_up_after"):
            positive_number(name, getattr(self, name))


@dataclass(frozen=True)
class ReplicaReport:
    """What one server did in this run.

    Attributes:
        url: the server (without credentials).
        version: its vLLM version.
        rows: rows (or units) it answered.
        batches: requests it answered.
        failures: times it failed and was set aside.
        busy_seconds: time its answered requests took, summed over the requests in flight.
        rows_per_second: its throughput over the run's wall time.
        concurrency: requests in flight it was allowed at the end (with ``concurrency="auto"``: the
            limit it settled on).
    """

    url: str
    version: str | None
    rows: int
    batches: int
    failures: int
    busy_seconds: float
    rows_per_second: float
    concurrency: int


def replica_reports(pool: ReplicaPool, seconds: float) -> tuple[ReplicaReport, ...]:
    """What each server did in a run of ``seconds``."""
    return tuple(
        ReplicaReport(
            r.url,
            r.version,
            r.rows,
            r.batches,
            r.failures,
            r.busy,
            r.rows / max(seconds, 1e-9),
            pool.most_in_flight if r.limit is None else r.limit.settled,
        )
        for r in pool.replicas
    )


def served_section(
    fingerprint: dict[str, Any], replicas: list[Replica], reports: tuple[ReplicaReport, ...]
) -> dict[str, Any]:
    """The manifest's part about the model and the servers (every job writes the same keys)."""
    return {
        "model": fingerprint["model"]["model"],
        "model_root": fingerprint["model"]["root"],
        "servers": [{"url": r.url, "version": r.version} for r in replicas],
        "fingerprint": fingerprint,
        "replicas": [asdict(report) for report in reports],
    }


def model_difference(first: dict[str, Any], other: dict[str, Any]) -> str | None:
    """How two servers' models differ (name, weights, or their vectors for the probe text), else ``None``.

    Examples:
        >>> model_difference({"model": "m", "root": "/w"}, {"model": "m", "root": "/v"})
        "'m' (/w) vs 'm' (/v)"
    """
    detail = f"{first['model']!r} ({first['root']}) vs {other['model']!r} ({other['root']})"
    same = (first["model"], first["root"]) == (other["model"], other["root"])
    if "probe" in first and "probe" in other:
        similarity = cosine(first["probe"], other["probe"])
        if same and similarity >= PROBE_MIN_COSINE:
            return None
        return f"{detail}, cosine of their vectors for one text {similarity:.3f}"
    return None if same else detail


@dataclass(frozen=True)
class JobServers:
    """The servers of one job run: their pool and the model they serve (see :func:`job_servers`)."""

    pool: ReplicaPool
    served: dict[str, Any]


async def _served_by(replica: Replica, describe: Describe, *, refresh: bool = False) -> dict[str, Any]:
    """What ``replica`` serves (``describe``'s record), its version noted; ``refresh`` reads the server's
    description again (it may have restarted on other weights)."""
    info = await replica.client.server_info(refresh=refresh)
    replica.version = info.version
    return await describe(replica, info)


async def recheck_model(replica: Replica, *, served: dict[str, Any], describe: Describe, out: str) -> None:
    """Check that a server back from being set aside still serves the job's model (the pool's ``admit``).

    Raises:
        JobMismatch: it serves another one now (it was given no work since it was set aside).
        APIError: it cannot be reached (an error about the replica: it is set aside again).
    """
    difference = model_difference(served, await _served_by(replica, describe, refresh=True))
    if difference is not None:
        change = f"the model served by {replica.url} changed during the run ({difference})"
        raise JobMismatch(out, [f"{change}: it was given no work since it was set aside"])


async def served_model(
    replicas: list[Replica], describe: Describe
) -> tuple[dict[str, Any], list[tuple[Replica, BaseException]]]:
    """The model every replica that answers serves, and the replicas that cannot be reached (with their
    errors: the job starts without them); refuses a mix.

    Raises:
        ReplicaMismatch: two replicas differ.
        APIError: no replica can be reached, or one refuses the job's options.
    """
    answers = await asyncio.gather(
        *(_served_by(replica, describe) for replica in replicas), return_exceptions=True
    )
    for answer in answers:
        if isinstance(answer, BaseException) and not is_about(answer, "replica"):
            raise answer
    up = [
        (replica, answer)
        for replica, answer in zip(replicas, answers, strict=True)
        if isinstance(answer, dict)
    ]
    if not up:
        raise next(answer for answer in answers if isinstance(answer, BaseException))
    (first_replica, first), others = up[0], up[1:]
    for replica, other in others:
        difference = model_difference(first, other)
        if difference is not None:
            raise ReplicaMismatch((first_replica.url, replica.url), difference)
    down = [
        (replica, answer)
        for replica, answer in zip(replicas, answers, strict=True)
        if isinstance(answer, BaseException)
    ]
    return first, down


@contextlib.asynccontextmanager
async def job_servers(
    servers: Servers, settings: JobSettings, describe: Describe, *, out: str, hedge: bool = True
) -> AsyncIterator[JobServers]:
    """The job's servers for the block: clients made for URLs (closed after it), the model they serve
    (:func:`served_model`), and the pool that hands them out, which checks a server back from being set
    aside before its next request (:func:`recheck_model`) and hedges stuck requests unless not ``hedge``
    (see :class:`~vllm_tasks.jobs.replicas.ReplicaPool`); ``out`` names the job in its errors.

    Raises:
        InvalidInputError: see :func:`~vllm_tasks.jobs.replicas.make_replicas`.
        ReplicaMismatch, APIError: see :func:`served_model`.
    """
    replicas, made = make_replicas(servers)
    try:
        served, down = await served_model(replicas, describe)
        admit = functools.partial(recheck_model, served=served, describe=describe, out=out)
        pool = ReplicaPool(
            replicas,
            settings.concurrency,
            settings.retry_replica_after,
            settings.give_up_after,
            admit=admit,
            hedge=hedge,
        )
        for replica, error in down:  # checked again before it gets work
            pool.set_aside(replica, error, held=False)
            logger.warning("%s cannot be reached (%s): starting without it", replica.url, error)
        yield JobServers(pool, served)
    finally:
        await close_made(made)
