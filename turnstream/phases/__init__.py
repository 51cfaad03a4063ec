"""The phases of a turn, which ``loop.TurnRunner`` conducts (SPEC §3).

* ``step``: one model call. The request built from the transcript and fitted to the model's
  context window, streamed into the turn's recorder, requested again when the stream breaks,
  a tool call was cut off or the request was refused as too long.
* ``tool_round``: what becomes of a step's tool calls. Refused, run (after approval where
  needed), or left for the client, with the tool-effect ledger kept while they run.
* ``resume``: picking a turn up after a pause or after its runner died, and the ``Course``
  (step, last step) the conductor keeps.
* ``toolbox``: the tools the model may call at each step, and a team's speaker.
* ``answer``: whether a final answer fits the ``output`` model asked for.
* ``ending``: a turn held while its store fails, ended as soon as the store takes writes.
* ``config``: ``RunConfig``, what a turn is run with.

Each phase gets what it needs as arguments (the recorder, the step, a small settings
dataclass) and never the runner, so each can be driven alone with the scripted provider and
the memory store. None of them imports ``turnstream.loop``.
"""
