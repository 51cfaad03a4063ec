"""Where a protocol client's new message goes in the tree, read from the history it sends
(``turnstream/server/branch_point.py``): a history that leads to the branch shown changes
nothing, one that leaves it (an edit, dropped messages) names the turn before that point."""

from __future__ import annotations

from turnstream.blocks import ToolResultBlock, Turn, UserBlock
from turnstream.branches import ROOT
from turnstream.server.branch_point import Said, branch_point


def turn(tid: str, text: str, parent: str | None, blocks: list[UserBlock | ToolResultBlock] | None = None) -> Turn:
    return Turn(id=tid, session_id="s", input=text, parent_turn_id=parent, blocks=list(blocks or []))


# one -> two -> three, and "two" answered again beside it (two_b, same input)
TREE = [turn("t1", "one", None), turn("t2", "two", "t1"), turn("t3", "three", "t2"), turn("t2b", "two", "t1")]


def says(*texts: str) -> list[Said]:
    return [Said(t) for t in texts]


def test_no_history_or_the_branch_shown_follows_the_current_leaf() -> None:
    assert branch_point(TREE, "t3", []) is None  # only the new message (a script, curl)
    assert branch_point(TREE, "t3", says("one", "two", "three")) is None
    assert branch_point([], None, says("one")) is None  # a chat with no turns yet


def test_an_edited_or_shortened_history_follows_the_turn_before_it_leaves() -> None:
    assert branch_point(TREE, "t3", says("one", "two, edited")) == "t1"
    assert branch_point(TREE, "t3", says("one")) == "t1"  # what followed "one" was dropped
    assert branch_point(TREE, "t3", says("one", "two")) == "t2"
    assert branch_point(TREE, "t3", says("one, edited", "two", "three")) == ROOT
    assert branch_point(TREE, "t3", says("one", "two", "three, edited")) == "t2"


def test_versions_of_one_message_are_told_apart_by_the_answers_id_else_by_the_branch_shown() -> None:
    assert branch_point(TREE, "t3", [Said("one", {"t1"}), Said("two", {"t2b"})]) == "t2b"
    assert branch_point(TREE, "t2b", says("one", "two")) is None  # t2b is shown
    assert branch_point(TREE, "t3", says("one", "two")) == "t2"  # t2 is on the branch shown
    assert branch_point(TREE, "t1", says("one", "two")) == "t2b"  # neither: the newest


def test_messages_a_turn_took_while_open_and_added_context_are_not_a_divergence() -> None:
    tree = [turn("t1", "one\n\nContext:\n- page: home", None, [
                UserBlock(seq=1, step=1, text="also this"),
                ToolResultBlock(seq=2, step=1, tool_use_id="c", content="Denied. The user said: not Ada",
                                is_error=True)]),
            turn("t2", "queued a\n\nqueued b", "t1")]
    assert branch_point(tree, "t2", says("one", "also this", "not Ada", "queued a", "queued b")) is None
    assert branch_point(tree, "t2", says("one", "also this")) == "t1"
