"""Who may ask: API keys and their rate limits (docs/api.md, "Authentication and rate limits")."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable

from ..config import ApiKeyConfig, api_key_sha256
from .errors import key_invalid, key_missing, rate_limited

log = logging.getLogger(__name__)

API_KEY_HEADER = b"x-api-key"  # ASGI header names are lower case; compared lower-cased anyway
MAX_API_KEY_BYTES = 256  # a longer X-API-Key is no key of ours (and is not hashed)


class TokenBucket:
    """``burst`` requests at once, refilled at ``rate`` requests per second."""

    __slots__ = ("rate", "burst", "tokens", "stamp")

    def __init__(self, rate: float, burst: int, now: float):
        self.rate, self.burst = rate, burst
        self.tokens, self.stamp = float(burst), now

    def take(self, now: float) -> float:
        """Take one token: 0.0 when granted, else the seconds until one is there."""
        self.tokens = min(float(self.burst), self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class Access:
    """Who may ask: the configured API keys, known by their SHA-256 only, and each key's
    token bucket. Without keys the service is open (and not rate limited).

    The key itself is never stored, logged or echoed; logs name the key's configured name."""

    def __init__(self, keys: Iterable[ApiKeyConfig] = (), clock: Callable[[], float] = time.monotonic):
        self.keys = {key.sha256: key for key in keys}
        self.clock = clock
        self._buckets: dict[str, TokenBucket] = {}

    @property
    def open(self) -> bool:
        return not self.keys

    def admit(self, headers: Iterable[tuple[bytes, bytes]]) -> ApiKeyConfig | None:
        """The key a request presents (header ``X-API-Key``, any case): 401_001 without one,
        401_002 for an unknown one (or several), 429_001 when its bucket is empty."""
        if self.open:
            return None
        values = [value for name, value in headers if name.lower() == API_KEY_HEADER]
        if not values or values == [b""]:
            raise key_missing()
        if len(values) > 1 or len(values[0]) > MAX_API_KEY_BYTES:
            raise key_invalid()
        key = self.keys.get(api_key_sha256(values[0].strip()))
        if key is None:
            log.info("refused a request with an unknown API key")
            raise key_invalid()
        if key.rate_limit is not None and key.burst is not None:
            now = self.clock()
            bucket = self._buckets.get(key.name)
            if bucket is None:
                bucket = self._buckets[key.name] = TokenBucket(key.rate_limit, key.burst, now)
            wait = bucket.take(now)
            if wait > 0.0:
                log.info("API key %s is rate limited for %.2f s", key.name, wait)
                raise rate_limited(max(1, math.ceil(wait)))
        return key

