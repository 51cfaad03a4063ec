"""Durable storage of users, sessions, turns, blocks and replayable events."""

from .memory import MemoryStore
from .protocol import SeqConflictError, Store, StoredEvent, TurnConflictError, User

__all__ = ["MemoryStore", "SeqConflictError", "Store", "StoredEvent", "TurnConflictError", "User"]
