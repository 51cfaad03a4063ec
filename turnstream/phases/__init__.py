"""The phases of a turn, which ``loop.TurnRunner`` conducts (SPEC §3).

* ``step``: one model call. The request built from the transcript, streamed into the
  turn's recorder, requested again when the stream breaks or a tool call was cut off.
* ``tool_round``: what becomes of a step's tool calls. Refused, run (after approval where
  needed), or left for the client, with the tool-effect ledger kept while they run.

Each phase gets what it needs as arguments (the recorder, the step, a small settings
dataclass) and never the runner, so each can be driven alone with the scripted provider and
the memory store. None of them imports ``turnstream.loop``.
"""
