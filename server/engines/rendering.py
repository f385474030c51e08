"""Render the runtime's messages to token ids, message by message.

Each message is tokenised on its own and the ids concatenated, so a prompt that extends
another by whole messages extends it at the token level too (the prefix cache depends on it).
For ChatML every message starts with the `<|im_start|>` special token, so this equals
tokenising the whole text; a test checks that. Templates other than ChatML are rendered by
the same rule with their own markers when we know them (Llama 3); anything else falls back to
ChatML markers, which a model that does not know them will read as plain text.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from threading import Lock
from typing import Any

from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt


@dataclass(frozen=True)
class ChatFormat:
    name: str
    message_start: str  # "{role}" is replaced
    message_end: str
    end_of_turn: str  # the token that ends an assistant answer

    def render(self, message: Message) -> str:
        return self.message_start.format(role=message.role) + message.content + self.message_end

    def generation_prompt(self) -> str:
        return self.message_start.format(role="assistant")


CHATML = ChatFormat("chatml", "<|im_start|>{role}\n", "<|im_end|>\n", "<|im_end|>")
LLAMA3 = ChatFormat("llama3", "<|start_header_id|>{role}<|end_header_id|>\n\n", "<|eot_id|>",
                    "<|eot_id|>")


def detect_format(tokenizer: Any) -> ChatFormat:
    vocab = tokenizer.get_vocab()
    if "<|im_start|>" in vocab and "<|im_end|>" in vocab:
        return CHATML
    if "<|start_header_id|>" in vocab and "<|eot_id|>" in vocab:
        return LLAMA3
    return CHATML


class ChatRenderer:
    """Token ids for prompts, with a bounded cache of per-message ids (thread-safe)."""

    def __init__(self, tokenizer: Any, chat_format: ChatFormat | None = None,
                 max_cached_messages: int = 4096) -> None:
        self.tokenizer = tokenizer
        self.format = chat_format or detect_format(tokenizer)
        self._cache: OrderedDict[tuple[str, str], tuple[int, ...]] = OrderedDict()
        self._max = max_cached_messages
        self._lock = Lock()
        self.generation_ids = self.encode(self.format.generation_prompt())
        self.end_of_turn_id = int(tokenizer.convert_tokens_to_ids(self.format.end_of_turn))

    def encode(self, text: str) -> tuple[int, ...]:
        return tuple(self.tokenizer.encode(text, add_special_tokens=False))

    def message_ids(self, message: Message) -> tuple[int, ...]:
        key = (message.role, message.content)
        with self._lock:
            ids = self._cache.get(key)
            if ids is not None:
                self._cache.move_to_end(key)
                return ids
        ids = self.encode(self.format.render(message))
        with self._lock:
            self._cache[key] = ids
            if len(self._cache) > self._max:
                self._cache.popitem(last=False)
        return ids

    def prompt_ids(self, prompt: Prompt | str) -> list[int]:
        """Ids of the messages and the opened assistant turn; raw text is encoded as is."""
        if isinstance(prompt, str):
            return list(self.encode(prompt))
        ids: list[int] = []
        for m in prompt.messages:
            ids.extend(self.message_ids(m))
        ids.extend(self.generation_ids)
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=False))
