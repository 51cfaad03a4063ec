"""Images and PDFs in a message, and an image a tool returns, sent over HTTP to
``turnstream mock-provider`` in each of the three wire formats: every request must pass the
provider's own checks (the mock answers 400 otherwise, and the turn fails), and carry the
bytes in that API's shape."""

from __future__ import annotations

import base64
import itertools
from typing import Any

import pytest

from tests.support.media import GIF, PDF, PNG
from tests.support.mock_provider import MockHandle
from turnstream import Agent, FilePart, ImagePart, tool
from turnstream.providers.anthropic import AnthropicProvider
from turnstream.providers.base import Provider
from turnstream.providers.openai_chat import OpenAIChatProvider
from turnstream.providers.openai_responses import OpenAIResponsesProvider
from turnstream.store import MemoryStore

FORMATS = ("anthropic", "openai-chat", "openai-responses")
_names = itertools.count()


def provider(fmt: str, name: str, base_url: str) -> Provider:
    if fmt == "anthropic":
        return AnthropicProvider(name, api_key="test-key", base_url=base_url)
    if fmt == "openai-chat":
        return OpenAIChatProvider(name, api_key="test-key", base_url=base_url + "/v1")
    return OpenAIResponsesProvider(name, api_key="test-key", base_url=base_url + "/v1")


@tool
def snapshot() -> list[Any]:
    """Take a picture of the screen."""
    return ["the screen, as a GIF", ImagePart(GIF, "image/gif", "screen.gif")]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def media_in(fmt: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """(kind, base64 data) of every image and file in a request, wherever it stands."""
    found: list[tuple[str, str]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            kind = node.get("type")
            if fmt == "anthropic" and kind in ("image", "document"):
                found.append((kind, node["source"]["data"]))
            elif kind == "image_url":
                found.append(("image", node["image_url"]["url"].partition(",")[2]))
            elif kind == "file" and "file" in node:
                found.append(("document", node["file"]["file_data"].partition(",")[2]))
            elif kind == "input_image":
                found.append(("image", node["image_url"].partition(",")[2]))
            elif kind == "input_file":
                found.append(("document", node["file_data"].partition(",")[2]))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(body.get("messages") or body.get("input"))
    return found


@pytest.mark.parametrize("fmt", FORMATS)
async def test_an_image_and_a_pdf_in_a_message_and_an_image_from_a_tool(fmt: str, mock_provider: MockHandle) -> None:
    name = mock_provider.scenario(f"media-{fmt}-{next(_names)}", {"steps": [
        {"blocks": [{"type": "tool_use", "name": "snapshot", "input": {}}]},
        {"blocks": [{"type": "text", "text": "A dot, a page and a screen."}]}]})
    store = MemoryStore()
    async with Agent(provider(fmt, name, mock_provider.base_url), tools=[snapshot], store=store) as agent:
        turn = await agent.run(["What is in these?", ImagePart(PNG, "image/png", "dot.png"),
                                FilePart(PDF, name="page.pdf")])
        assert turn.status == "complete", turn.error
        assert turn.text == "A dot, a page and a screen."
        result = next(b for b in turn.blocks if b.type == "tool_result")
        assert [a.media_type for a in result.attachments] == ["image/gif"]
    first, second = mock_provider.requests(name)
    assert media_in(fmt, first) == [("image", b64(PNG)), ("document", b64(PDF))]
    assert media_in(fmt, second) == [("image", b64(PNG)), ("document", b64(PDF)), ("image", b64(GIF))]
    if fmt == "openai-chat":  # a tool message takes text: the image follows in a user message
        tool_msg, after = second["messages"][-2:]
        assert tool_msg["role"] == "tool" and "images follow" in tool_msg["content"]
        assert after["role"] == "user" and after["content"][0]["text"].startswith("The images returned by tool call")


@pytest.mark.parametrize("fmt", FORMATS)
async def test_the_mock_refuses_an_image_whose_bytes_are_not_its_type(fmt: str, mock_provider: MockHandle) -> None:
    """The validators are real: a GIF sent as a PNG is refused (the adapter cannot be made to
    send one, so the request is built by hand from the adapter's own body)."""
    import httpx2 as httpx

    from turnstream.mock.validate import anthropic_errors, openai_chat_errors, openai_responses_errors
    bad = {"anthropic": {"messages": [{"role": "user", "content": [
               {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(GIF)}}]}]},
           "openai-chat": {"messages": [{"role": "user", "content": [
               {"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64(GIF)}}]}]},
           "openai-responses": {"input": [{"type": "message", "role": "user", "content": [
               {"type": "input_image", "image_url": "data:image/png;base64," + b64(GIF)}]}]}}[fmt]
    check = {"anthropic": anthropic_errors, "openai-chat": openai_chat_errors,
             "openai-responses": openai_responses_errors}[fmt]
    assert "not a valid image/png" in (check(bad) or "")
    path = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses"}
    r = httpx.post(mock_provider.base_url + path[fmt], json={"model": "any", "max_tokens": 5, "stream": True, **bad},
                   timeout=10)
    assert r.status_code == 400 and "image/png" in r.text


async def test_the_same_bytes_are_stored_once(mock_provider: MockHandle) -> None:
    name = mock_provider.scenario(f"dedup-{next(_names)}", {"steps": [{"blocks": [{"type": "text", "text": "ok"}]}]})
    store = MemoryStore()
    async with Agent(provider("anthropic", name, mock_provider.base_url), store=store, session_id="s1") as agent:
        one = await agent.run(["first", ImagePart(PNG, "image/png")])
        two = await agent.run(["again", ImagePart(PNG, "image/png", "same.png")])
    refs = [b.attachments[0] for t in (one, two) for b in t.blocks if b.type == "user"]
    assert refs[0].sha256 == refs[1].sha256
    assert await store.get_blobs([refs[0].sha256]) == {refs[0].sha256: PNG}
    assert len(store._blobs) == 1
