"""Content parts: what a message may hold besides text (images and PDFs), and their checks.

A turn's input is a string, or a list of parts: strings (text), ``ImagePart`` and
``FilePart``. The bytes of each part are stored once, by their SHA-256 (``Store.put_blob``),
and the turn keeps ``Attachment`` references to them; each provider adapter sends them in
its own API's shape. Tools may return images too (``ToolImage``), see ``tools/executor.py``.

The checks here are the only ones: the media type must be one of ``IMAGE_TYPES`` or a PDF,
the bytes must look like that type, and the size must be within ``Limits``'s
``max_attachment_bytes``; ``ContentRejected`` names the offending part (``field``) and the
HTTP status the server answers with (413 too large, 422 otherwise).
"""

from __future__ import annotations

import base64
import hashlib
import mimetypes
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from .blocks import Attachment
from .errors import ContentRejected

if TYPE_CHECKING:
    from .store.protocol import Store

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
PDF = "application/pdf"
MEDIA_TYPES = (*IMAGE_TYPES, PDF)
MAX_ATTACHMENT_BYTES = 5 * 1024 * 1024
"""Default largest part, in bytes (Anthropic's limit for one image)."""
MAX_ATTACHMENTS = 10
"""Default most parts in one message."""


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image in a message: PNG, JPEG, GIF or WebP bytes."""

    data: bytes
    media_type: str
    name: str | None = None


@dataclass(frozen=True, slots=True)
class FilePart:
    """A document in a message (a PDF)."""

    data: bytes
    media_type: str = PDF
    name: str | None = None


MediaPart: TypeAlias = ImagePart | FilePart
Content: TypeAlias = str | Sequence[str | ImagePart | FilePart]
"""A turn's input: text, or text and media parts in order."""


_MAGIC: dict[str, tuple[bytes, ...]] = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    PDF: (b"%PDF-",),
}


def sniff(data: bytes) -> str | None:
    """The media type the bytes start like, among ``MEDIA_TYPES``; None for any other."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((t for t, heads in _MAGIC.items() if data.startswith(heads)), None)


def part_from_path(path: str | Path) -> MediaPart:
    """A part from a file on disk, its type read from its bytes (then its name)."""
    p = Path(path)
    data = p.read_bytes()
    media_type = sniff(data) or mimetypes.guess_type(p.name)[0] or "application/octet-stream"
    if media_type in IMAGE_TYPES:
        return ImagePart(data, media_type, p.name)
    return FilePart(data, media_type, p.name)


def part_of(media_type: str, data: bytes, name: str | None = None) -> MediaPart:
    """An ``ImagePart`` for an image type, else a ``FilePart``."""
    return ImagePart(data, media_type, name) if media_type in IMAGE_TYPES else FilePart(data, media_type, name)


def decode_base64(text: str, field: list[str | int]) -> bytes:
    """Base64 (standard or URL-safe, a ``data:`` URL too) to bytes; 422 naming ``field`` if not."""
    if text.startswith("data:"):
        text = text.partition(",")[2]
    try:
        return base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)
    except ValueError:
        raise ContentRejected(field, "must be base64") from None


def split(content: Content) -> tuple[str, list[MediaPart]]:
    """The text of an input (its strings joined by blank lines) and its media parts."""
    if isinstance(content, str):
        return content, []
    texts = [c for c in content if isinstance(c, str) and c]
    return "\n\n".join(texts), [c for c in content if not isinstance(c, str)]


def check_parts(parts: Sequence[MediaPart], *, max_bytes: int = MAX_ATTACHMENT_BYTES,
                max_count: int = MAX_ATTACHMENTS, field: Sequence[str | int] = ("parts",),
                index: Sequence[int] | None = None) -> None:
    """Refuse a list of parts with too many entries, a type not allowed, bytes that are not
    of their type, or one too large. ``index``: each part's position under ``field`` (its
    position in the list unless given)."""
    where = list(index) if index is not None else list(range(len(parts)))
    if len(parts) > max_count:
        raise ContentRejected([*field], f"at most {max_count} images or files per message", 413)
    for i, part in zip(where, parts, strict=True):
        if part.media_type not in MEDIA_TYPES:
            raise ContentRejected([*field, i, "media_type"],
                                  f"{part.media_type!r} is not accepted; one of {', '.join(MEDIA_TYPES)}")
        if len(part.data) > max_bytes:
            raise ContentRejected([*field, i, "data"], f"{len(part.data)} bytes; the largest accepted is "
                                                       f"{max_bytes} bytes", 413)
        if sniff(part.data) != part.media_type:
            raise ContentRejected([*field, i, "data"], f"the bytes are not a {part.media_type} file")


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def store_parts(store: Store, parts: Sequence[MediaPart]) -> list[Attachment]:
    """Store each part's bytes once (by hash) and return their references, in order."""
    out: list[Attachment] = []
    for p in parts:
        sha = await store.put_blob(p.data, p.media_type)
        out.append(Attachment(sha256=sha, media_type=p.media_type, size=len(p.data), name=p.name))
    return out


def data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


__all__ = [
    "IMAGE_TYPES",
    "MEDIA_TYPES",
    "PDF",
    "Content",
    "ContentRejected",
    "FilePart",
    "ImagePart",
    "MediaPart",
    "check_parts",
    "data_url",
    "digest",
    "part_from_path",
    "part_of",
    "sniff",
    "split",
    "store_parts",
]
