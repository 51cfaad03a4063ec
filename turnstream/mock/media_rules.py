"""The providers' rules for images and files in requests (where each API takes them, in
what shape, with bytes of the type they claim), as the mock provider checks them.

Split from ``validate.py`` (the transcript rules), which calls these per format.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from ..content import IMAGE_TYPES, PDF, sniff


def content_of(m: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's content as a list of blocks (a plain string is one text block)."""
    c = m.get("content")
    if isinstance(c, str):
        return [{"type": "text", "text": c}]
    return list(c or [])


def _base64(data: Any) -> bytes | None:
    if not isinstance(data, str):
        return None
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def _data_url(url: Any) -> tuple[str, bytes] | None:
    """``data:<type>;base64,<data>`` as (type, bytes); None for anything else."""
    if not isinstance(url, str) or not url.startswith("data:"):
        return None
    head, _, data = url[5:].partition(",")
    kind, _, enc = head.partition(";")
    raw = _base64(data) if enc == "base64" else None
    return (kind, raw) if raw is not None else None


def _media_bytes(where: str, media_type: Any, raw: bytes | None, allowed: tuple[str, ...]) -> str | None:
    """What is wrong with inline media bytes and their declared type, or None."""
    if media_type not in allowed:
        return f"{where}.media_type: Input should be " + ", ".join(repr(t) for t in allowed)
    if raw is None:
        return f"{where}.data: invalid base64 data"
    if sniff(raw) != media_type:
        return f"{where}.data: the data is not a valid {media_type} file"
    return None


_ANTHROPIC_RESULT = ("text", "image", "document", "search_result")


def _anthropic_media(where: str, b: dict[str, Any]) -> str | None:
    src = b.get("source")
    if not isinstance(src, dict) or src.get("type") != "base64":
        return f"{where}.source: Input tag does not match any of the expected tags: 'base64', 'url', 'file'"
    allowed = IMAGE_TYPES if b.get("type") == "image" else (PDF,)
    return _media_bytes(f"{where}.source.base64", src.get("media_type"), _base64(src.get("data")), allowed)


def anthropic_content_errors(messages: list[Any]) -> str | None:
    """The first content block a Messages API request may not hold where it stands, or None:
    images and documents only in user messages and tool results, with valid base64 bytes of
    an accepted type."""
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            continue
        for j, b in enumerate(content_of(m)):
            kind, where = b.get("type"), f"messages.{i}.content.{j}"
            if m.get("role") == "assistant" and kind in ("image", "document"):
                return f"{where}.type: '{kind}' blocks are not allowed in assistant messages"
            if kind in ("image", "document") and (problem := _anthropic_media(where, b)):
                return problem
            if kind == "tool_result" and isinstance(b.get("content"), list):
                for k, inner in enumerate(b["content"]):
                    ikind = inner.get("type") if isinstance(inner, dict) else None
                    if ikind not in _ANTHROPIC_RESULT:
                        return f"{where}.content.{k}.type: Input tag '{ikind}' found using 'type' does not match"
                    if ikind in ("image", "document") and (problem := _anthropic_media(f"{where}.content.{k}", inner)):
                        return problem
    return None


_CHAT_PARTS = {"user": ("text", "image_url", "input_audio", "file"), "system": ("text",), "developer": ("text",),
               "assistant": ("text", "refusal"), "tool": ("text",)}


def openai_chat_content_errors(messages: list[Any]) -> str | None:
    """The first content part a Chat Completions request may not hold, or None: images
    (``image_url`` with an http(s) or base64 data URL of an image type) and files (``file``
    with a PDF data URL and a filename) only in user messages; tool messages take text."""
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("content"), list):
            continue
        allowed = _CHAT_PARTS.get(str(m.get("role")), ())
        for j, part in enumerate(m["content"]):
            kind = part.get("type") if isinstance(part, dict) else None
            where = f"messages[{i}].content[{j}]"
            if kind not in allowed:
                return (f"Invalid value: '{kind}'. Supported values are: "
                        + " and ".join(repr(a) for a in allowed) + f". (param '{where}.type')")
            if kind == "image_url":
                url = (part.get("image_url") or {}).get("url")
                if isinstance(url, str) and url.startswith(("http://", "https://")):
                    continue
                decoded = _data_url(url)
                if decoded is None:
                    return f"Invalid '{where}.image_url.url': expected a URL or a base64 data URL."
                if problem := _media_bytes(f"'{where}.image_url.url'", decoded[0], decoded[1], IMAGE_TYPES):
                    return f"Invalid image: {problem}"
            if kind == "file":
                f = part.get("file") or {}
                if not f.get("file_id"):
                    decoded = _data_url(f.get("file_data"))
                    if decoded is None or not f.get("filename"):
                        return f"Invalid '{where}.file': file_data must be a base64 data URL, with a filename."
                    if problem := _media_bytes(f"'{where}.file.file_data'", decoded[0], decoded[1], (PDF,)):
                        return f"Invalid file: {problem}"
    return None


def _responses_part(where: str, part: Any, allowed: tuple[str, ...]) -> str | None:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind not in allowed:
        return f"Invalid value: '{kind}'. Supported values are: " + ", ".join(repr(a) for a in allowed) + \
            f". (param '{where}.type')"
    assert isinstance(part, dict)
    if kind == "input_image" and not part.get("file_id"):
        url = part.get("image_url")
        if isinstance(url, str) and url.startswith(("http://", "https://")):
            return None
        decoded = _data_url(url)
        if decoded is None:
            return f"Invalid '{where}.image_url': expected a URL or a base64 data URL."
        return _media_bytes(f"'{where}.image_url'", decoded[0], decoded[1], IMAGE_TYPES)
    if kind == "input_file" and not part.get("file_id") and not part.get("file_url"):
        decoded = _data_url(part.get("file_data"))
        if decoded is None or not part.get("filename"):
            return f"Invalid '{where}': file_data must be a base64 data URL, with a filename."
        return _media_bytes(f"'{where}.file_data'", decoded[0], decoded[1], (PDF,))
    return None


_RESPONSES_USER_PARTS = ("input_text", "input_image", "input_file")


def openai_responses_content_errors(items: list[Any]) -> str | None:
    """The first content part a Responses input may not hold, or None: ``input_image`` and
    ``input_file`` in user messages and in a ``function_call_output``'s list ``output``."""
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        itype = item.get("type", "message")
        if itype == "message" and item.get("role") == "user" and isinstance(item.get("content"), list):
            for j, part in enumerate(item["content"]):
                if problem := _responses_part(f"input[{i}].content[{j}]", part, _RESPONSES_USER_PARTS):
                    return problem
        if itype == "function_call_output" and not isinstance(item.get("output"), str):
            output = item.get("output")
            if not isinstance(output, list):
                return f"Invalid type for 'input[{i}].output': expected a string or an array of content parts."
            for j, part in enumerate(output):
                if problem := _responses_part(f"input[{i}].output[{j}]", part, _RESPONSES_USER_PARTS):
                    return problem
    return None
