"""The notebook's settings: read with every other one (``turnstream.settings``), turned into the
notebook package's typed values by the server (``server.main.notebook_config``)."""

from __future__ import annotations

import pytest

from turnstream.errors import UsageError
from turnstream.notebook import FileLimits, KernelLimits, PoolLimits, SandboxConfig
from turnstream.server.main import notebook_config
from turnstream.settings import Settings


def test_defaults() -> None:
    assert notebook_config(Settings.from_env({})) == (SandboxConfig(), KernelLimits(), PoolLimits(), FileLimits())


def test_every_setting_is_read() -> None:
    sandbox, limits, pool, files = notebook_config(Settings.from_env({
        "TURNSTREAM_NOTEBOOK_SANDBOX": "off", "TURNSTREAM_NOTEBOOK_NETWORK": "on", "TURNSTREAM_MAX_KERNELS": "3",
        "TURNSTREAM_KERNEL_IDLE_TIMEOUT": "2.5", "TURNSTREAM_KERNEL_MEMORY_MB": "512",
        "TURNSTREAM_NOTEBOOK_FILE_MB": "5", "TURNSTREAM_NOTEBOOK_FILES_MB": "20"}))
    assert files == FileLimits(file_bytes=5 * 1024**2, total_bytes=20 * 1024**2)
    assert sandbox == SandboxConfig(mode="off", network=True)
    assert limits.memory_bytes == 512 * 1024**2
    assert (pool.max_kernels, pool.idle_timeout) == (3, 2.5)
    assert notebook_config(Settings.from_env({"TURNSTREAM_KERNEL_IDLE_TIMEOUT": "off"}))[2].idle_timeout is None
    assert notebook_config(Settings.from_env({"TURNSTREAM_NOTEBOOK_SANDBOX": "on"}))[0].mode == "bubblewrap"


@pytest.mark.parametrize(("name", "value"), [
    ("TURNSTREAM_NOTEBOOK_SANDBOX", "no"), ("TURNSTREAM_MAX_KERNELS", "0"), ("TURNSTREAM_MAX_KERNELS", "2.5"),
    ("TURNSTREAM_KERNEL_IDLE_TIMEOUT", "-1"), ("TURNSTREAM_KERNEL_MEMORY_MB", "lots"),
    ("TURNSTREAM_NOTEBOOK_FILE_MB", "0"), ("TURNSTREAM_NOTEBOOK_FILES_MB", "-3")])
def test_bad_values_name_their_variable(name: str, value: str) -> None:
    with pytest.raises(UsageError, match=name):
        Settings.from_env({name: value})
