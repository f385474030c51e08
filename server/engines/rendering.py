"""Render the runtime's messages to token ids, message by message.

Each message is tokenised on its own and the ids concatenated, so a prompt that extends
another by whole messages extends it at the token level too (the prefix cache depends on it).

Which markers: the model's own chat template (`tokenizer.chat_template`, or a template file
given with `--chat-template`), rendered turn by turn (`chat_template.py`), when a check at
load finds it prefix-stable. A template that is not gets a logged warning and our built-in
rendering: ChatML or Llama 3 markers by the vocabulary, ChatML for anything else (a model
that does not know them reads them as plain text). Where the model's template renders the
check conversation to exactly the built-in format's ids (SmolLM2's ChatML), the built-in
rendering is used: the same ids, one cached encoding per message, and prompts byte-identical
to those before templates were read (a test asserts it). For ChatML every message starts
with the `<|im_start|>` special token, so message-by-message ids equal the whole text's; a
test checks that.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from threading import Lock
from typing import Any

from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt
from stackroute.server.engines.chat_template import (
    CHECK_CALLS,
    CHECK_CONVERSATION,
    TemplateSegments,
    check_template,
    end_of_turn_id,
)

log = logging.getLogger(__name__)


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
    """Token ids for prompts, with a bounded cache of per-message ids (thread-safe).

    `chat_format` forces a built-in format; else `chat_template` (a Jinja template, from
    `--chat-template`) or the tokenizer's own template is used where it is prefix-stable.
    `rendering` names what renders: "template" or a built-in format's name;
    `template_problem` says why a template was not used (None: used, or none to use)."""

    def __init__(self, tokenizer: Any, chat_format: ChatFormat | None = None,
                 max_cached_messages: int = 4096, *, chat_template: str | None = None) -> None:
        self.tokenizer = tokenizer
        self.format = chat_format or detect_format(tokenizer)
        self._cache: OrderedDict[tuple[str, str], tuple[int, ...]] = OrderedDict()
        self._max = max_cached_messages
        self._lock = Lock()
        self.generation_ids = self.encode(self.format.generation_prompt())
        self.end_of_turn_id = int(tokenizer.convert_tokens_to_ids(self.format.end_of_turn))
        self.template_problem: str | None = None
        self.segments: TemplateSegments | None = None
        if chat_format is None:
            self._use_template(chat_template, max_cached_messages)
        self.rendering = "template" if self.segments is not None else self.format.name

    def _use_template(self, override: str | None, max_cached: int) -> None:
        """Render through `override` or the model's template where it is prefix-stable."""
        template = override or getattr(self.tokenizer, "chat_template", None)
        if not isinstance(template, str) or not template.strip():
            return  # no template: the built-in format, as before templates were read
        source = "the --chat-template template" if override else "the model's chat template"
        check = check_template(self.tokenizer, template)
        end_id = end_of_turn_id(self.tokenizer, template, check.generation_suffix) \
            if check.is_prefix_stable else None
        if check.is_prefix_stable and end_id is None:
            end_id = getattr(self.tokenizer, "eos_token_id", None)
            if end_id is None:
                check = type(check)(problem="no token ends an assistant turn (no special "
                                            "token after the answer, no eos token)")
        if not check.is_prefix_stable:
            self.template_problem = check.problem
            log.warning("%s is not prefix-stable (%s); prompts use the built-in %s markers "
                        "instead", source, check.problem, self.format.name)
            return
        segments = TemplateSegments(self.tokenizer, template,
                                    generation_suffix=check.generation_suffix,
                                    max_cached_segments=max_cached)
        if override is None and self._renders_like(segments):
            log.info("the model's chat template renders as the built-in %s format; using it",
                     self.format.name)
            return
        self.segments = segments
        self.end_of_turn_id = int(end_id)  # type: ignore[arg-type]
        self.generation_ids = segments.generation_ids
        log.info("prompts render through %s (checked prefix-stable)", source)

    def _renders_like(self, segments: TemplateSegments) -> bool:
        """Whether the built-in format gives the template's ids for the check's calls."""
        return all(self._format_ids(CHECK_CONVERSATION[:n]) == segments.prompt_ids(
            CHECK_CONVERSATION[:n]) for n in CHECK_CALLS)

    def _format_ids(self, messages: Sequence[Message]) -> list[int]:
        ids: list[int] = []
        for m in messages:
            ids.extend(self.message_ids(m))
        return ids + list(self.encode(self.format.generation_prompt()))

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
        if self.segments is not None:
            return self.segments.prompt_ids(prompt.messages)
        ids: list[int] = []
        for m in prompt.messages:
            ids.extend(self.message_ids(m))
        ids.extend(self.generation_ids)
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=False))
