"""An MCP result's content as turnstream's tool result (``turnstream/mcp/content.py``): the
cases the test server does not send, built from the SDK's own types. The common case (text,
an image, a PDF, a link and audio from a real server, reaching each provider) is in
``test_mcp_tools.py``."""

from __future__ import annotations

import base64

import mcp_types as mt

from tests.support.media import GIF, PDF, PNG
from turnstream import FilePart, ImagePart
from turnstream.mcp.content import result_content


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def image(data: str, mime: str) -> mt.ImageContent:
    return mt.ImageContent(type="image", data=data, mime_type=mime)


def blob(uri: str, data: bytes, mime: str | None) -> mt.EmbeddedResource:
    return mt.EmbeddedResource(type="resource", resource=mt.BlobResourceContents(uri=uri, mime_type=mime,
                                                                                 blob=b64(data)))


def test_the_type_of_an_image_is_read_from_its_bytes() -> None:
    text, media = result_content(mt.CallToolResult(content=[image(b64(GIF), "image/png")]))
    assert media == [ImagePart(GIF, "image/gif")]
    assert text == f"[image: image/gif, {len(GIF)} bytes; attached]"


def test_what_no_provider_takes_stays_a_line_of_text() -> None:
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"/>'
    text, media = result_content(mt.CallToolResult(content=[
        image(b64(svg), "image/svg+xml"), image("not base64!", "image/png"),
        blob("file:///srv/data.bin", b"\x00\x01\x02", None), blob("file:///srv/a.png", PDF, "image/png")]))
    assert text.split("\n\n") == [
        f"[image: image/svg+xml, {len(svg)} bytes; not shown to the model: tool results take image/png, "
        "image/jpeg, image/gif, image/webp]",
        "[image: image/png; left out: its data is not base64]",
        "[resource <file:///srv/data.bin>: binary, 3 bytes; not shown to the model: tool results take "
        "image/png, image/jpeg, image/gif, image/webp, application/pdf]",
        f"[resource <file:///srv/a.png>: application/pdf, {len(PDF)} bytes; attached]"]
    assert media == [FilePart(PDF, "application/pdf", "a.png")]  # a PDF whatever its label says


def test_an_error_result_names_its_images_without_attaching_them() -> None:
    text, media = result_content(mt.CallToolResult(content=[mt.TextContent(type="text", text="it broke"),
                                                            image(b64(PNG), "image/png")], is_error=True),
                                 with_media=False)
    assert media == []
    assert text == (f"it broke\n\n[image: image/png, {len(PNG)} bytes; not shown to the model: an error result "
                    "is text only]")


def test_structured_content_is_the_text_when_there_is_no_content() -> None:
    assert result_content(mt.CallToolResult(content=[], structured_content={"sum": 5})) == ('{"sum":5}', [])
