"""Durable storage of users, sessions, turns, blocks and replayable events."""

from .memory import MemoryStore
from .protocol import Store, StoredEvent, TurnConflictError, User

__all__ = ["MemoryStore", "Store", "StoredEvent", "TurnConflictError", "User"]
