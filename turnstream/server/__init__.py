"""The HTTP + SSE + WebSocket server behind ``turnstream serve`` (SPEC §7, §8, §10).

Modules: ``app`` (the Starlette app), ``api`` (route declarations and OpenAPI), ``auth``,
``routes_sessions`` / ``routes_turns`` / ``routes_chat`` (the endpoints), ``follow`` (replay
then live, without gap or duplicate), ``sse`` and ``aisdk`` (encoders over turn events),
``ws`` (the session WebSocket), ``turns`` (the turns this process drives), ``state``,
``logs`` and ``main`` (``serve``).
"""
