"""The vendored fixtures (fixtures/ at the repository root): which tiny models and which passes.

Shared by scripts/make_fixtures.py (which builds them) and the tests (which replay them without
transformers). The two architectures differ in GQA ratio (1 vs 4), head_dim (16 vs 32), tying,
RoPE scaling and vocab raggedness.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..weights.synthetic import tiny_config

FIXTURES_DIR = Path(__file__).resolve().parents[3] / "fixtures"

FIXTURE_MODELS = {
    "tiny-mha": tiny_config(num_attention_heads=4, num_key_value_heads=4, head_dim=16),
    "tiny-gqa4-llama3": tiny_config(
        hidden_size=96, intermediate_size=160, num_attention_heads=8, num_key_value_heads=2, head_dim=32,
        vocab_size=300, tie_word_embeddings=False, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
}


@dataclass(frozen=True)
class FixturePass:
    model: str
    mode: str
    tokens: int
    past: int

    @property
    def directory(self) -> str:
        tag = "decode" if self.mode == "decode" else f"prefill{self.tokens}"
        return f"{self.model}-{tag}" + (f"-p{self.past}" if self.past else "")


FIXTURE_PASSES = (
    FixturePass("tiny-mha", "decode", 1, 0),
    FixturePass("tiny-mha", "prefill", 7, 0),
    FixturePass("tiny-gqa4-llama3", "prefill", 32, 0),
    FixturePass("tiny-gqa4-llama3", "decode", 1, 31),
)
