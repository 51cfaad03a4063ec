"""An MCP tool result as a turnstream tool result: text, and the images and PDFs every
provider format takes in a tool result.

Each content block becomes a paragraph of the result's text: text as it is; a resource link
as its name, URI, type and description; an embedded text resource as its text under its URI.
An image, or an embedded binary resource, whose bytes are a PNG, JPEG, GIF, WebP or PDF file
becomes a media part (``ImagePart`` / ``FilePart``), which the loop stores as the result's
attachments with the limits of any tool's images (``content.check_parts``); its paragraph
says it is attached. The type is read from the bytes, so a server that labels a JPEG
``image/png`` still gets it through. What no provider takes in a tool result (audio, any
other blob, an image of another type or with bytes that are not base64) stays a line saying
what it was and why the model does not see it. ``structuredContent`` is used as JSON when
there is no content.
"""

from __future__ import annotations

import base64
import binascii
from urllib.parse import unquote, urlsplit

import mcp_types as mt
import orjson

from ..content import IMAGE_TYPES, MEDIA_TYPES, MediaPart, part_of, sniff

ACCEPTED = ", ".join(IMAGE_TYPES)


def _decode(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def _file_name(uri: str) -> str | None:
    """The last segment of a resource's URI (``report.pdf``), as the attachment's name."""
    name = unquote(urlsplit(uri).path.rpartition("/")[2])
    return name or None


def _media(kind: str, mime: str, data: str, name: str | None, accepted: tuple[str, ...],
           media: list[MediaPart] | None) -> str:
    """An image or a binary resource: attached to ``media`` (when given) if its bytes are of
    a type the providers take, else a line saying why not."""
    raw = _decode(data)
    if raw is None:
        return f"[{kind}: {mime}; left out: its data is not base64]"
    size = f"{len(raw)} bytes"
    found = sniff(raw)
    if found not in accepted:
        return f"[{kind}: {mime}, {size}; not shown to the model: tool results take {', '.join(accepted)}]"
    if media is None:
        return f"[{kind}: {found}, {size}; not shown to the model: an error result is text only]"
    media.append(part_of(found, raw, name))
    return f"[{kind}: {found}, {size}; attached]"


def block_text(block: mt.ContentBlock, media: list[MediaPart] | None = None) -> str:
    """One content block as text; its image or PDF goes to ``media`` when given."""
    if isinstance(block, mt.TextContent):
        return block.text
    if isinstance(block, mt.ImageContent):
        return _media("image", block.mime_type, block.data, None, IMAGE_TYPES, media)
    if isinstance(block, mt.AudioContent):
        raw = _decode(block.data)
        size = f", {len(raw)} bytes" if raw is not None else ""
        return f"[audio: {block.mime_type}{size}; not played to the model: no provider takes audio in a tool result]"
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
    return _media(f"resource <{resource.uri}>", resource.mime_type or "binary", resource.blob,
                  _file_name(str(resource.uri)), MEDIA_TYPES, media)


def result_content(result: mt.CallToolResult, *, with_media: bool = True) -> tuple[str, list[MediaPart]]:
    """The whole result: its blocks as text, one per paragraph, and its images and PDFs in
    order (none when ``with_media`` is false: an error result's text says they were there)."""
    if not result.content and result.structured_content is not None:
        return orjson.dumps(result.structured_content).decode(), []
    media: list[MediaPart] = []
    text = "\n\n".join(block_text(b, media if with_media else None) for b in result.content)
    return text, media


__all__ = ["block_text", "result_content"]
