"""The file tools stay inside their root, whatever path the model makes up."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from turnstream.tools.tool import Tool
from turnstream.toolsets.files import (
    MAX_ENTRIES,
    MAX_READ_BYTES,
    NotATextFileError,
    PathOutsideRootError,
    make_file_tools,
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """tmp/root with a few files, and tmp/root-evil, tmp/outside.txt next to it."""
    root = tmp_path / "root"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "README.md").write_text("# hello\n", encoding="utf-8")
    (root / "src" / "main.py").write_text("print('hi')\n", encoding="utf-8")
    (root / "src" / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "root-evil").mkdir()
    (tmp_path / "root-evil" / "secret.txt").write_text("sibling secret", encoding="utf-8")
    (tmp_path / "outside.txt").write_text("outside secret", encoding="utf-8")
    return root


def _tools(root: Path) -> dict[str, Tool]:
    return {t.name: t for t in make_file_tools(root)}


def call(tool: Tool, **args: Any) -> str:
    """Validate the arguments as the executor does, then run the function."""
    assert tool.fn is not None
    result = tool.fn(**tool.validate(args))
    assert isinstance(result, str)
    return result


def read(root: Path, path: str) -> str:
    return call(_tools(root)["read_file"], path=path)


def ls(root: Path, path: str = ".") -> str:
    return call(_tools(root)["list_directory"], path=path)


def test_schemas_name_the_arguments(tree: Path) -> None:
    tools = _tools(tree)
    assert set(tools) == {"list_directory", "read_file"}
    assert tools["read_file"].input_schema["required"] == ["path"]
    assert "required" not in tools["list_directory"].input_schema
    assert tools["list_directory"].input_schema["properties"]["path"]["default"] == "."


def test_reads_a_file_inside_the_root(tree: Path) -> None:
    assert read(tree, "src/main.py") == "print('hi')\n"
    assert read(tree, "./src/../README.md") == "# hello\n"
    assert read(tree, str(tree / "README.md")) == "# hello\n"


def test_list_directory_sorts_marks_directories_and_sizes(tree: Path) -> None:
    (tree / "b.txt").write_text("x" * 2048, encoding="utf-8")
    (tree / "A.txt").write_text("abc", encoding="utf-8")
    out = ls(tree).splitlines()
    assert out[0] == "./ (4 entries)"
    assert out[1:] == ["A.txt  3 B", "b.txt  2.0 KB", "README.md  8 B", "src/"]
    assert ls(tree, "src").splitlines() == ["src/ (2 entries)", "main.py  12 B", "pkg/"]


def test_list_directory_defaults_to_the_root(tree: Path) -> None:
    tool = _tools(tree)["list_directory"]
    assert call(tool) == ls(tree, ".")


def test_empty_directory(tree: Path) -> None:
    (tree / "empty").mkdir()
    assert ls(tree, "empty") == "empty/ (0 entries)\n(empty directory)"


def test_one_entry_is_singular(tree: Path) -> None:
    assert ls(tree, "src/pkg").splitlines() == ["src/pkg/ (1 entry)", "__init__.py  0 B"]


def test_list_directory_caps_the_entries(tree: Path) -> None:
    many = tree / "many"
    many.mkdir()
    for i in range(MAX_ENTRIES + 7):
        (many / f"f{i:04d}").touch()
    out = ls(tree, "many").splitlines()
    assert len(out) == 1 + MAX_ENTRIES + 1
    assert out[-1] == "[... 7 more entries not shown]"
    assert out[1].startswith("f0000")


@pytest.mark.parametrize("path", ["..", "../outside.txt", "src/../../outside.txt", "../root-evil/secret.txt",
                                  "/etc/passwd", "/"])
def test_paths_leaving_the_root_are_refused(tree: Path, path: str) -> None:
    with pytest.raises(PathOutsideRootError, match="outside the allowed directory"):
        read(tree, path)


def test_absolute_path_into_a_sibling_with_the_same_prefix_is_refused(tree: Path) -> None:
    sibling = tree.parent / "root-evil"
    assert str(sibling).startswith(str(tree))  # a string-prefix check would let it through
    with pytest.raises(PathOutsideRootError):
        read(tree, str(sibling / "secret.txt"))
    with pytest.raises(PathOutsideRootError):
        ls(tree, str(sibling))


def test_dot_dot_in_list_directory_is_refused(tree: Path) -> None:
    with pytest.raises(PathOutsideRootError):
        ls(tree, "..")
    with pytest.raises(PathOutsideRootError):
        ls(tree, "src/../..")


def test_symlink_pointing_out_is_refused(tree: Path) -> None:
    (tree / "escape.txt").symlink_to(tree.parent / "outside.txt")
    (tree / "escape_dir").symlink_to(tree.parent)
    with pytest.raises(PathOutsideRootError):
        read(tree, "escape.txt")
    with pytest.raises(PathOutsideRootError):
        read(tree, "escape_dir/outside.txt")
    with pytest.raises(PathOutsideRootError):
        ls(tree, "escape_dir")


def test_symlink_staying_inside_is_followed(tree: Path) -> None:
    (tree / "alias.py").symlink_to(tree / "src" / "main.py")
    (tree / "code").symlink_to("src", target_is_directory=True)
    assert read(tree, "alias.py") == "print('hi')\n"
    assert read(tree, "code/main.py") == "print('hi')\n"
    listing = ls(tree)
    assert "alias.py@  (symlink)" in listing
    assert "code@  (symlink)" in listing


def test_root_given_through_a_symlink_still_confines(tree: Path) -> None:
    link = tree.parent / "link-to-root"
    link.symlink_to(tree, target_is_directory=True)
    assert read(link, "README.md") == "# hello\n"
    with pytest.raises(PathOutsideRootError):
        read(link, "../outside.txt")


def test_missing_file_and_wrong_kind(tree: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"'nope\.txt' does not exist"):
        read(tree, "nope.txt")
    with pytest.raises(IsADirectoryError, match="use list_directory"):
        read(tree, "src")
    with pytest.raises(NotADirectoryError, match="use read_file"):
        ls(tree, "README.md")


def test_nul_in_path_is_refused(tree: Path) -> None:
    with pytest.raises(ValueError, match="NUL"):
        read(tree, "README.md\x00.txt")


def test_large_file_is_truncated_with_a_note(tree: Path) -> None:
    size = MAX_READ_BYTES + 1000
    (tree / "big.txt").write_text("a" * size, encoding="utf-8")
    out = read(tree, "big.txt")
    body, note = out.split("\n\n[truncated: ")
    assert body == "a" * MAX_READ_BYTES
    assert note == f"showed the first {MAX_READ_BYTES:,} of {size:,} bytes; 1,000 bytes left out]"


def test_truncation_does_not_split_a_character(tree: Path) -> None:
    # "é" is two bytes; an odd prefix puts the cut in the middle of one.
    (tree / "accents.txt").write_text("x" + "é" * MAX_READ_BYTES, encoding="utf-8")
    body = read(tree, "accents.txt").split("\n\n[truncated")[0]
    assert "\ufffd" not in body
    assert body == "x" + "é" * ((MAX_READ_BYTES - 1) // 2)


def test_file_of_exactly_the_limit_is_whole(tree: Path) -> None:
    (tree / "exact.txt").write_text("b" * MAX_READ_BYTES, encoding="utf-8")
    assert read(tree, "exact.txt") == "b" * MAX_READ_BYTES


def test_binary_file_is_refused(tree: Path) -> None:
    (tree / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    with pytest.raises(NotATextFileError, match="looks like a binary file"):
        read(tree, "image.png")
    (tree / "latin1.txt").write_bytes("caf\xe9 cr\xe8me br\xfbl\xe9e".encode("latin-1"))
    with pytest.raises(NotATextFileError):
        read(tree, "latin1.txt")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_special_files_are_not_read(tree: Path) -> None:
    os.mkfifo(tree / "pipe")
    assert "pipe  (special file)" in ls(tree)
    with pytest.raises(ValueError, match="not a regular file"):
        read(tree, "pipe")  # would hang if opening it waited for a writer


def test_root_must_be_a_directory(tree: Path) -> None:
    with pytest.raises(NotADirectoryError):
        make_file_tools(tree / "README.md")


def test_schema_rejects_unknown_arguments(tree: Path) -> None:
    with pytest.raises(ValueError, match="Invalid arguments for tool 'read_file'"):
        _tools(tree)["read_file"].validate({"path": "x", "mode": "w"})
    with pytest.raises(ValueError, match="path"):
        _tools(tree)["read_file"].validate({})
