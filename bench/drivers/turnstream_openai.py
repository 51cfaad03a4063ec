"""turnstream's public Agent API on the OpenAI Chat Completions wire format (``openai:``).

Runs under the shared bench harness (``../shared/bench/drivers/_common.py``), registered by
``bench/client_cpu.py``.
"""
import os
import sys

SHARED_DRIVERS = os.environ["TURNSTREAM_BENCH_DRIVERS"]
sys.path.insert(0, SHARED_DRIVERS)
import _common as C  # noqa: E402

agent = None


def setup(a):
    global agent
    os.environ["OPENAI_BASE_URL"] = a.base_url + "/v1"
    os.environ["OPENAI_API_KEY"] = C.API_KEY
    from turnstream import Agent, tool

    @tool
    async def update_cell(cell_id: str, code: str) -> str:
        """Replace the source code of one notebook cell."""
        return C.record_tool_call(cell_id, code)

    agent = Agent(f"openai:{C.MODEL_OPENAI}", tools=[update_cell], max_steps=10)


async def run_one(i: int) -> str:
    turn = await agent.run(C.PROMPT)
    return turn.text


if __name__ == "__main__":
    C.main("turnstream_openai", run_one, setup)
