"""The requests the OpenAI adapters build from a neutral transcript, checked against the
validators that answer with the APIs' own messages."""

from __future__ import annotations

import json

from turnstream.blocks import ProviderBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from turnstream.mock.validate import openai_chat_errors, openai_responses_errors
from turnstream.providers import openai_chat, openai_responses
from turnstream.providers.base import Message, ModelRequest, ToolSpec
from turnstream.transcript import build

TOOLS = [ToolSpec("get_weather", "Weather", {"type": "object", "properties": {"city": {"type": "string"}}})]
A = ToolUseBlock(seq=1, step=1, tool_use_id="call_a", name="get_weather", input={"city": "Paris"},
                 raw_input='{"city":  "Paris"}')
B = ToolUseBlock(seq=2, step=1, tool_use_id="call_b", name="get_weather", input={"city": "Rome"})


def transcript() -> list[Message]:
    return [Message("user", ["Weather?"]),
            Message("assistant", [TextBlock(text="Checking."), A, B]),
            Message("user", [ToolResultBlock(tool_use_id="call_a", content="sunny"),
                             ToolResultBlock(tool_use_id="call_b", content="rain", is_error=True), "And tomorrow?"])]


def test_chat_request_shape() -> None:
    body = openai_chat.request_body(ModelRequest("gpt-x", transcript(), system="Be brief.", tools=TOOLS,
                                                 tool_choice="none", max_tokens=99))
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_completion_tokens"] == 99 and body["tool_choice"] == "none"
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user"]
    assistant = body["messages"][2]
    assert assistant["content"] == "Checking."
    # the model's own argument bytes when they are valid JSON; otherwise serialised once
    assert [c["function"]["arguments"] for c in assistant["tool_calls"]] == ['{"city":  "Paris"}',
                                                                           '{"city":"Rome"}']
    assert [m["tool_call_id"] for m in body["messages"][3:5]] == ["call_a", "call_b"]
    assert body["tools"][0]["function"]["name"] == "get_weather"
    assert openai_chat_errors(body) is None


def test_chat_compatible_servers_get_max_tokens() -> None:
    body = openai_chat.request_body(ModelRequest("m", transcript()), openai_native=False)
    assert "max_tokens" in body and "max_completion_tokens" not in body
    assert "tool_choice" not in body  # never without tools


def test_chat_validator_messages() -> None:
    body = openai_chat.request_body(ModelRequest("m", transcript()))
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "tool", "user"]
    del body["messages"][3]
    assert openai_chat_errors(body) == (
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        "'tool_call_id'. The following tool_call_ids did not have response messages: call_b")
    body = openai_chat.request_body(ModelRequest("m", transcript()))
    body["messages"].insert(1, {"role": "tool", "tool_call_id": "call_z", "content": "x"})
    assert openai_chat_errors(body) == ("Invalid parameter: messages with role 'tool' must be a response to a "
                                        "preceeding message with 'tool_calls'.")
    body = openai_chat.request_body(ModelRequest("m", transcript()))
    body["messages"][1]["tool_calls"][0]["function"]["arguments"] = {"city": "Paris"}
    assert "expected a string" in (openai_chat_errors(body) or "")


def test_responses_request_shape() -> None:
    body = openai_responses.request_body(ModelRequest("gpt-x", transcript(), system="Be brief.", tools=TOOLS,
                                                      tool_choice="none", max_tokens=99))
    assert body["instructions"] == "Be brief." and body["max_output_tokens"] == 99
    assert body["tool_choice"] == "none" and body["tools"][0]["strict"] is False
    kinds = [i["role"] if i["type"] == "message" else i["type"] for i in body["input"]]
    assert kinds == ["user", "assistant", "function_call", "function_call", "function_call_output",
                     "function_call_output", "user"]
    assert openai_responses_errors(body) is None


REASONING = {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "hm"}],
             "encrypted_content": "gAAA"}


def reasoning_block(next_id: str | None, origin: str = "openai-responses:gpt-x") -> ThinkingBlock:
    return ThinkingBlock(seq=0, step=1, thinking="hm", origin=origin,
                         signature=json.dumps({"item": REASONING, "next_id": next_id}))


def test_reasoning_item_is_replayed_verbatim_right_before_its_follower_with_its_id() -> None:
    msgs = [Message("user", ["q"]), Message("assistant", [reasoning_block("fc_9"), A]),
            Message("user", [ToolResultBlock(tool_use_id="call_a", content="sunny")])]
    body = openai_responses.request_body(ModelRequest("gpt-x", msgs))
    assert body["input"][1] == REASONING
    assert body["input"][2]["type"] == "function_call" and body["input"][2]["id"] == "fc_9"
    assert openai_responses_errors(body) is None


def test_reasoning_without_its_follower_is_left_out() -> None:
    msgs = [Message("user", ["q"]), Message("assistant", [TextBlock(text="a"), reasoning_block(None)]),
            Message("user", ["next"])]
    body = openai_responses.request_body(ModelRequest("gpt-x", msgs))
    assert not any(i.get("type") == "reasoning" for i in body["input"])
    assert openai_responses_errors(body) is None
    broken = {"input": [{"role": "user", "content": "q"}, REASONING, {"role": "user", "content": "x"}]}
    assert openai_responses_errors(broken) == (
        "Item 'rs_1' of type 'reasoning' was provided without its required following item.")


def test_reasoning_goes_only_to_the_model_that_made_it() -> None:
    blocks = [reasoning_block("fc_9"), A.model_copy(update={"seq": 1}),
              ToolResultBlock(seq=2, step=1, tool_use_id="call_a", content="sunny")]
    same, _ = build([("q", blocks)], "openai-responses:gpt-x")
    other, _ = build([("q", blocks)], "openai-responses:gpt-y")
    assert any(i.get("type") == "reasoning" for i in openai_responses.input_items(ModelRequest("gpt-x", same)))
    items = openai_responses.input_items(ModelRequest("gpt-y", other))
    assert not any(i.get("type") == "reasoning" for i in items)
    assert all("id" not in i for i in items if i.get("type") == "function_call")  # no orphan fc_ id either


def test_client_side_provider_items_are_not_replayed() -> None:
    shell = ProviderBlock(provider="openai-responses", origin="openai-responses:gpt-x",
                          data={"type": "local_shell_call", "input": {"type": "local_shell_call", "id": "lsh_1"}})
    search = ProviderBlock(provider="openai-responses", origin="openai-responses:gpt-x",
                           data={"type": "web_search_call", "input": {"type": "web_search_call", "id": "ws_1"}})
    msgs = [Message("user", ["q"]), Message("assistant", [shell, search, TextBlock(text="done")])]
    items = openai_responses.input_items(ModelRequest("gpt-x", msgs))
    assert [i["role"] if i["type"] == "message" else i["type"] for i in items] == [
        "user", "web_search_call", "assistant"]


def test_responses_validator_messages() -> None:
    body = openai_responses.request_body(ModelRequest("m", transcript()))
    calls_only = [i for i in body["input"] if i.get("type") != "function_call_output" or i["call_id"] != "call_b"]
    assert openai_responses_errors({"input": calls_only}) == "No tool output found for function call call_b."
    orphan = [{"role": "user", "content": "q"}, {"type": "function_call_output", "call_id": "call_z", "output": "x"}]
    assert openai_responses_errors({"input": orphan}) == (
        "No tool call found for function call output with call_id call_z.")


def test_chat_thinking_is_never_sent() -> None:
    msgs = [Message("user", ["q"]),
            Message("assistant", [ThinkingBlock(thinking="hm", origin="openai:m", signature=""), TextBlock(text="a")]),
            Message("user", ["more"])]
    body = openai_chat.request_body(ModelRequest("m", msgs))
    assert body["messages"][1] == {"role": "assistant", "content": "a"}
