"""An MCP tool result as the text every provider format takes in a tool result.

Tool results are text in turnstream's blocks (``ToolResultBlock.content`` is a string), so
each content block becomes text: text as it is; a resource link as its name, URI, type and
description; an embedded text resource as its text under its URI; an image, audio or
binary resource as a line saying what it was (its type and size) — the model is told it was
there, but does not see it. ``structuredContent`` is used as JSON when there is no content.
"""

from __future__ import annotations

import base64
import binascii

import mcp_types as mt
import orjson


def _size(data: str) -> str:
    try:
        n = len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        n = len(data)
    return f"{n} bytes"


def block_text(block: mt.ContentBlock) -> str:
    """One content block as text."""
    if isinstance(block, mt.TextContent):
        return block.text
    if isinstance(block, mt.ImageContent):
        return f"[image: {block.mime_type}, {_size(block.data)}; images are not shown to the model]"
    if isinstance(block, mt.AudioContent):
        return f"[audio: {block.mime_type}, {_size(block.data)}; audio is not played to the model]"
    if isinstance(block, mt.ResourceLink):
        parts = [f"[resource link: {block.name} <{block.uri}>"]
        if block.mime_type:
            parts.append(f" ({block.mime_type})")
        if block.description:
            parts.append(f": {block.description}")
        return "".join(parts) + "]"
    resource = block.resource
    if isinstance(resource, mt.TextResourceContents):
        return f"[resource <{resource.uri}>]\n{resource.text}"
    mime = resource.mime_type or "binary"
    return f"[resource <{resource.uri}>: {mime}, {_size(resource.blob)}; not shown to the model]"


def result_text(result: mt.CallToolResult) -> str:
    """The whole result as text: its blocks, one per paragraph."""
    if not result.content and result.structured_content is not None:
        return orjson.dumps(result.structured_content).decode()
    return "\n\n".join(block_text(b) for b in result.content)


__all__ = ["block_text", "result_text"]
