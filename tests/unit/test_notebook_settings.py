"""The notebook's settings as the server reads them from the environment (one function,
``server.main.notebook_settings``, to be folded into the settings object)."""

from __future__ import annotations

import pytest

from turnstream.errors import UsageError
from turnstream.notebook import KernelLimits, PoolLimits, SandboxConfig
from turnstream.server.main import notebook_settings


def test_defaults_sandbox_no_network_and_a_cap_sized_for_the_machine() -> None:
    assert notebook_settings({}) == (SandboxConfig(), KernelLimits(), PoolLimits())
    assert SandboxConfig().mode == "bubblewrap" and not SandboxConfig().network


def test_every_setting() -> None:
    sandbox, limits, pool = notebook_settings({
        "TURNSTREAM_NOTEBOOK_SANDBOX": "off", "TURNSTREAM_NOTEBOOK_NETWORK": "on", "TURNSTREAM_MAX_KERNELS": "3",
        "TURNSTREAM_KERNEL_IDLE_TIMEOUT": "2.5", "TURNSTREAM_KERNEL_MEMORY_MB": "512"})
    assert (sandbox.mode, sandbox.network) == ("off", True)
    assert limits.memory_bytes == 512 * 1024**2
    assert (pool.max_kernels, pool.idle_timeout) == (3, 2.5)
    assert notebook_settings({"TURNSTREAM_KERNEL_IDLE_TIMEOUT": "off"})[2].idle_timeout is None
    assert notebook_settings({"TURNSTREAM_NOTEBOOK_SANDBOX": "on"})[0].mode == "bubblewrap"


@pytest.mark.parametrize(("name", "value"), [
    ("TURNSTREAM_NOTEBOOK_SANDBOX", "no"), ("TURNSTREAM_MAX_KERNELS", "0"), ("TURNSTREAM_MAX_KERNELS", "2.5"),
    ("TURNSTREAM_KERNEL_IDLE_TIMEOUT", "-1"), ("TURNSTREAM_KERNEL_MEMORY_MB", "lots")])
def test_a_bad_value_is_a_usage_error_that_names_the_setting(name: str, value: str) -> None:
    with pytest.raises(UsageError, match=name):
        notebook_settings({name: value})
