"""API keys: random, shown once, stored only as a SHA-256 hash."""

from __future__ import annotations

import hashlib
import secrets


def new_key() -> str:
    return "ts_" + secrets.token_urlsafe(24)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()
