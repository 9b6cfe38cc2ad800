"""Per-principal rate limits and quotas: one mechanism, answered with 429 and Retry-After.

Rate limits use the generic cell rate algorithm (GCRA): a limit of L requests per period P spaces requests
T = P / L apart and tolerates a burst of L. Each (bucket, principal) keeps one number, its theoretical arrival
time (TAT); a request at `now` is allowed when max(TAT, now) - now <= P - T, and moves TAT on by T.

Where the state lives: in Redis when MEMAUDIT_REDIS_URL is set (one Lua script, atomic, shared by every API
process; keys hold the principal's id only, e.g. ``memaudit:rate:submit:key:12``), in this process otherwise
(the embedded default has one API process). If Redis cannot be reached the limit is not enforced for that
request (fail open, logged): Redis being down must not take the read API down with it.

Quotas count rows in the database (e.g. a key's queued and running audits) and need no state of their own.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from functools import lru_cache

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import Audit
from app.db.models.audit import ACTIVE_STATUSES
from app.errors import TooManyRequests
from app.settings import Settings

log = logging.getLogger("memaudit.limits")

_GCRA = """
local now = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local tolerance = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
if tat - now > tolerance then return tostring(tat - now - tolerance) end
redis.call('SET', KEYS[1], tostring(tat + interval), 'PX', math.ceil((tat + interval - now) * 1000) + 1000)
return '0'
"""
QUOTA_RETRY_SECONDS = 60  # a quota frees up when an audit finishes: there is no exact time to give


@dataclass(frozen=True)
class RateLimit:
    bucket: str  # "requests" | "submit" | …: each bucket is limited separately
    per_minute: int

    @property
    def interval(self) -> float:
        return 60.0 / self.per_minute

    @property
    def tolerance(self) -> float:
        return 60.0 - self.interval


class LocalLimiter:
    """GCRA state in this process (the embedded default). Bounded: at most `max_entries` principals."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self._tat: dict[str, float] = {}
        self._lock = threading.Lock()
        self._max = max_entries

    def wait(self, rate: RateLimit, principal_id: str) -> float:
        """Seconds to wait before this request would be allowed; 0 (and counted) when allowed now."""
        key, now = f"{rate.bucket}:{principal_id}", time.monotonic()
        with self._lock:
            tat = max(self._tat.get(key, now), now)
            if tat - now > rate.tolerance:
                return tat - now - rate.tolerance
            if len(self._tat) >= self._max:
                self._tat = {k: v for k, v in self._tat.items() if v > now}  # drop principals back at full burst
            self._tat[key] = tat + rate.interval
            return 0.0


class RedisLimiter:
    def __init__(self, url: str) -> None:
        from redis import Redis

        # Short timeouts: a request waits at most this long for the limiter before it goes on without it.
        self._redis = Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
        self._script = self._redis.register_script(_GCRA)

    def wait(self, rate: RateLimit, principal_id: str) -> float:
        from redis.exceptions import RedisError

        try:
            answer = self._script(
                keys=[f"memaudit:rate:{rate.bucket}:{principal_id}"], args=[time.time(), rate.interval, rate.tolerance]
            )
        except RedisError as exc:
            log.warning("rate limit %s not enforced: Redis unreachable (%s)", rate.bucket, type(exc).__name__)
            return 0.0
        return float(answer)


@lru_cache
def _limiter_for(redis_url: str | None) -> LocalLimiter | RedisLimiter:
    return RedisLimiter(redis_url) if redis_url else LocalLimiter()


def check_rate(settings: Settings, principal_id: str, bucket: str, per_minute: int) -> None:
    """Raise TooManyRequests (429, Retry-After) when `principal_id` is over `per_minute` in `bucket`."""
    if per_minute <= 0:
        return
    wait = _limiter_for(settings.redis_url).wait(RateLimit(bucket, per_minute), principal_id)
    if wait > 0:
        raise TooManyRequests(
            f"rate limit of {per_minute} {bucket} per minute reached for this key; retry after the Retry-After"
            " header's seconds",
            retry_after=wait,
        )


def check_active_audits(session: Session, settings: Settings, key_id: int | None) -> None:
    """Quota: an API key may have at most `max_active_audits_per_key` audits queued or running."""
    limit = settings.max_active_audits_per_key
    if limit <= 0 or key_id is None:
        return
    active = session.scalar(
        select(func.count()).where(
            Audit.owner_key_id == key_id, Audit.status.in_(ACTIVE_STATUSES), Audit.batch_id.is_(None)
        )
    )
    if (active or 0) >= limit:
        raise TooManyRequests(
            f"this key already has {limit} audits queued or running (MEMAUDIT_MAX_ACTIVE_AUDITS_PER_KEY); "
            "wait for some to finish or cancel them",
            retry_after=QUOTA_RETRY_SECONDS,
        )


def check_batch_size(settings: Settings, rows: int | None) -> None:
    """Quota: a batch holds at most `max_batch_size` people (``rows=None``: the roster was cut off past it)."""
    limit = settings.max_batch_size
    if limit > 0 and (rows is None or rows > limit):
        raise TooManyRequests(
            f"a batch holds at most {limit} people (MEMAUDIT_MAX_BATCH_SIZE); split the roster into several batches",
            retry_after=QUOTA_RETRY_SECONDS,
        )


def check_active_batch_audits(session: Session, settings: Settings, key_id: int | None, adding: int) -> None:
    """Quota: an API key's batches may have at most `max_active_batch_audits_per_key` audits queued or running,
    these ``adding`` included. Counted apart from single audits, so that a large batch never blocks them."""
    limit = settings.max_active_batch_audits_per_key
    if limit <= 0 or key_id is None:
        return
    active = session.scalar(
        select(func.count()).where(
            Audit.owner_key_id == key_id, Audit.status.in_(ACTIVE_STATUSES), Audit.batch_id.is_not(None)
        )
    )
    if (active or 0) + adding > limit:
        raise TooManyRequests(
            f"this key's batches may have at most {limit} audits queued or running"
            " (MEMAUDIT_MAX_ACTIVE_BATCH_AUDITS_PER_KEY); wait for a batch to finish, cancel one, or send fewer people",
            retry_after=QUOTA_RETRY_SECONDS,
        )
