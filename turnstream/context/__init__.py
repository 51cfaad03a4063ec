"""The model's context window: how big it is, how full a request would make it, and what is
cleared from a request to make it fit (docs/context.md).

Only what is *sent* shrinks: the store keeps every block as it was, so replay, the audit
trail, the chats' history and exports show everything.
"""
