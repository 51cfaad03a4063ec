"""The price table: whole nano-dollars, dated model names, each API's way of counting cached
input, and a settings file that adds or replaces entries (or is refused, naming the entry)."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnstream.blocks import Usage
from turnstream.errors import UsageError
from turnstream.limits import usd
from turnstream.pricing import PRICES, Price, cost, dollars, load_prices, price_of, tokens


def test_every_entry_is_in_whole_nano_dollars_and_names_its_source() -> None:
    for origin, p in PRICES.items():
        assert all(isinstance(v, int) and v >= 0 for v in (p.input, p.output, p.cache_read, p.cache_write)), origin
        assert "read 20" in p.source, origin
    sonnet = PRICES["anthropic:claude-sonnet-4-5"]
    assert (sonnet.input, sonnet.output, sonnet.cache_read, sonnet.cache_write) == (3000, 15000, 300, 3750)


def test_a_dated_name_takes_its_prefix_and_responses_takes_openai() -> None:
    assert price_of("anthropic:claude-sonnet-4-5-20250929") is PRICES["anthropic:claude-sonnet-4-5"]
    assert price_of("openai-responses:gpt-4.1-mini") is PRICES["openai:gpt-4.1-mini"]
    assert price_of("openai:gpt-4.1-2025-04-14") is PRICES["openai:gpt-4.1"]
    assert price_of("anthropic:claude-sonnet-4-20250514") is PRICES["anthropic:claude-sonnet-4"]
    assert price_of("anthropic:claude-sonnet-40") is None  # a prefix counts only up to a dash
    assert price_of("scripted:demo") is None


def test_cached_input_is_counted_as_each_api_counts_it() -> None:
    p = Price(1000, 2000, 100, 1250, "t")
    anthropic = Usage(input_tokens=10, output_tokens=5, cache_read_input_tokens=100, cache_creation_input_tokens=20)
    assert tokens(anthropic, "anthropic") == 135
    assert cost(anthropic, "anthropic", p) == 10 * 1000 + 100 * 100 + 20 * 1250 + 5 * 2000
    openai = Usage(input_tokens=110, output_tokens=5, cache_read_input_tokens=100)  # input includes the cached 100
    assert tokens(openai, "openai") == 115
    assert cost(openai, "openai", p) == 10 * 1000 + 100 * 100 + 5 * 2000
    assert cost(openai, "openai", None) == 0


def test_sums_do_not_drift() -> None:
    step = cost(Usage(input_tokens=1, output_tokens=1), "anthropic", PRICES["openai:gpt-5-mini"])
    assert sum([step] * 1_000_000) == 2_250_000_000  # exact, unlike a sum of floats
    assert dollars(usd("0.1") + usd("0.2")) == "$0.3000"


def test_a_file_adds_and_replaces_entries(tmp_path: Path) -> None:
    f = tmp_path / "p.json"
    f.write_text('{"anthropic:claude-sonnet-4-5": {"input": "2.5", "output": 12, "source": "contract"},'
                 ' "openai:mine": {"input": 0.001, "output": 1}}')
    table = load_prices(f)
    assert table["anthropic:claude-sonnet-4-5"] == Price(2500, 12000, 0, 0, "contract")
    assert table["openai:mine"].input == 1
    assert table["openai:gpt-4.1"] is PRICES["openai:gpt-4.1"]


@pytest.mark.parametrize(("text", "why"), [
    ('{"anthropic:x": {"output": 1}}', "no input price"),
    ('{"anthropic:x": {"input": "0.0001", "output": 1}}', "not a whole number"),
    ('{"x": {"input": 1, "output": 1}}', "provider:model"),
    ('[1]', "an object"),
    ("{", "cannot be read"),
])
def test_a_bad_file_is_refused_naming_why(tmp_path: Path, text: str, why: str) -> None:
    f = tmp_path / "p.json"
    f.write_text(text)
    with pytest.raises(UsageError, match=why):
        load_prices(f)
