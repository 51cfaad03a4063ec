"""Scenarios: scripted model behaviour for demos and tests, and the engine that plays them.

The JSON files here are the built-in scenarios (``scripted:notebook-demo`` and friends);
``engine`` reads a scenario and says what each step streams. The production ``scripted:``
provider (``providers/scripted.py``) and the mock provider (``mock/``) both play them.
"""
