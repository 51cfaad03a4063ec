"""Driving ``turnstream chat`` under a pseudo-terminal (pexpect), for the terminal e2e suites."""

from __future__ import annotations

import pexpect

PROMPT = "you ›"


class Chat:
    """One running chat: answer its prompt, wait for output, wait for it to end."""

    def __init__(self, child: pexpect.spawn) -> None:
        self.child = child

    def say(self, line: str) -> None:
        self.child.expect(PROMPT)
        self.child.sendline(line)

    def expect(self, pattern: str) -> None:
        self.child.expect(pattern)

    def expect_exit(self) -> int:
        self.child.expect(pexpect.EOF)
        self.child.close()
        status: int = self.child.exitstatus
        return status

    @property
    def seen(self) -> str:
        """Everything the chat printed up to the last match."""
        return str(self.child.before or "") + str(self.child.after or "")
