"""Server test fixtures: a tiny GGUF (the embedded model fixtures live in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

TINY_SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
TINY_CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _byte_level_alphabet() -> list[str]:
    """The 256 printable stand-ins byte-level BPE uses for the bytes 0..255, in byte order."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    stand_ins: dict[int, int] = {byte: byte for byte in printable}
    next_free = 256
    for byte in range(256):
        if byte not in stand_ins:
            stand_ins[byte] = next_free
            next_free += 1
    return [chr(stand_ins[byte]) for byte in range(256)]


def write_tiny_llama_gguf(path: Path, *, seed: int = 0) -> Path:
    """A 2-layer llama GGUF (hidden 16, byte-level BPE vocab of 260) that converts in a second."""
    import gguf

    hidden, num_heads, num_kv_heads, ffn, num_layers = 16, 2, 1, 32, 2
    head_dim = hidden // num_heads
    # One merge: transformers falls back to (absent) scores when the merge list is empty.
    tokens = [*TINY_SPECIAL_TOKENS, *_byte_level_alphabet(), "\u0120t"]
    rng = np.random.default_rng(seed)

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-llama")
    writer.add_block_count(num_layers)
    writer.add_context_length(128)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(num_heads)
    writer.add_head_count_kv(num_kv_heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types(
        [gguf.TokenType.CONTROL] * len(TINY_SPECIAL_TOKENS)
        + [gguf.TokenType.NORMAL] * (len(tokens) - len(TINY_SPECIAL_TOKENS))
    )
    writer.add_token_merges(["\u0120 t"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_chat_template(TINY_CHAT_TEMPLATE)
    # numpy shapes are [out_features, in_features], as in torch; GGUF stores them reversed.
    writer.add_tensor("token_embd.weight", weight(len(tokens), hidden))
    writer.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    for layer in range(num_layers):
        prefix = f"blk.{layer}"
        writer.add_tensor(f"{prefix}.attn_norm.weight", np.ones(hidden, dtype=np.float32))
        writer.add_tensor(f"{prefix}.ffn_norm.weight", np.ones(hidden, dtype=np.float32))
        writer.add_tensor(f"{prefix}.attn_q.weight", weight(hidden, hidden))
        writer.add_tensor(f"{prefix}.attn_k.weight", weight(num_kv_heads * head_dim, hidden))
        writer.add_tensor(f"{prefix}.attn_v.weight", weight(num_kv_heads * head_dim, hidden))
        writer.add_tensor(f"{prefix}.attn_output.weight", weight(hidden, hidden))
        writer.add_tensor(f"{prefix}.ffn_gate.weight", weight(ffn, hidden))
        writer.add_tensor(f"{prefix}.ffn_up.weight", weight(ffn, hidden))
        writer.add_tensor(f"{prefix}.ffn_down.weight", weight(hidden, ffn))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture
def tiny_gguf(tmp_path: Path) -> Path:
    """A fresh tiny llama GGUF file in this test's temp folder."""
    return write_tiny_llama_gguf(tmp_path / "tiny-llama.gguf")
