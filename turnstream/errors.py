"""Every exception turnstream raises, in one tree.

    TurnstreamError
    ├── UsageError               you misused the library (bad model name, bad tool, bad config)
    │   └── MissingExtraError    an optional part is not installed; says what to install
    └── RunError                 the run failed
        ├── ProviderError        the provider said no, or the stream broke
        │   ├── ProviderStatusError   an HTTP error status before the stream started
        │   ├── ProviderStreamError   an error event inside a stream that had started
        │   └── StreamBrokenError     the connection dropped, a chunk was malformed, or the
        │                             stream ended without its final event
        ├── KernelError          a notebook kernel could not start
        │   └── SandboxUnavailable    no sandbox could start, so no cell runs (says why)
        └── TurnCancelled        the turn was cancelled on purpose

Foreign exceptions (httpx, json) are mapped at the adapter boundary with ``raise … from``.
"""

from __future__ import annotations


class TurnstreamError(Exception):
    """Base of every turnstream exception."""


class UsageError(TurnstreamError):
    """The library was called wrongly; fix the calling code."""


class MissingExtraError(UsageError, ImportError):
    def __init__(self, extra: str, module: str) -> None:
        super().__init__(f"{module} is needed for this; install it with: pip install 'turnstream[{extra}]'")


class RunError(TurnstreamError):
    """A run failed for a reason outside the caller's code."""


class ProviderError(RunError):
    """The provider refused or failed. ``retryable`` says whether trying again can help."""

    code: str = "provider_error"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        error_type: str | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.error_type = error_type
        self.retryable = retryable
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.message!r}, status={self.status}, "
                f"error_type={self.error_type!r}, retryable={self.retryable})")


class ProviderStatusError(ProviderError):
    code = "provider_status"


class ProviderStreamError(ProviderError):
    code = "provider_stream_error"


class StreamBrokenError(ProviderError):
    code = "stream_broken"


class KernelError(RunError):
    """A notebook kernel could not start."""


class SandboxUnavailable(KernelError):
    """The notebook sandbox cannot start here; the message says what to do about it."""


class TurnCancelled(RunError):
    """The turn was cancelled by its owner."""


__all__ = [
    "KernelError",
    "MissingExtraError",
    "ProviderError",
    "ProviderStatusError",
    "ProviderStreamError",
    "RunError",
    "SandboxUnavailable",
    "StreamBrokenError",
    "TurnCancelled",
    "TurnstreamError",
    "UsageError",
]
