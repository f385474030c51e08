"""Prompts through the model's own chat template, turn by turn, and the check that this
rendering is prefix-stable (what the prefix cache needs).

A template renders a whole conversation. To keep the prefix cache's append-only property, a
prompt is cut into **segments**: message i's segment is the text the template adds when the
conversation grows from i messages to i + 1, and the generation prompt is what
`add_generation_prompt=True` adds at the end. Each segment is tokenised on its own and the ids
concatenated, so a prompt that extends another by whole messages extends it at the token level
by construction; a segment is cached under its whole history (a template may render a message
differently after a system message, as Gemma's folds the system text into the first user
turn).

That cut is faithful only when the template is **prefix-stable**: rendering N messages is a
text prefix of rendering N + 1, the generation prompt is the start of an assistant turn's
rendering, and the tokenizer cuts the whole text where the segments cut it (BPE can merge
across a boundary: SmolLM2's tokenizer merges a trailing `\\n\\n` into one token but splits it
before a letter, so Llama 3's template is not prefix-stable on it). `check_template` renders a
representative routing conversation call by call and says what breaks, if anything:

- each call's tokens (the whole text, tokenised as the model's own `apply_chat_template`
  would) must be a token prefix of the next call's, an assistant answer and a user turn later;
- the segments' ids must equal those tokens, so the model reads what its template means;
- the generation prompt must be the same after every conversation.

A template that fails is not used; `rendering.py` logs why and renders with its own markers.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from threading import Lock
from typing import Any

from stackroute.runtime.errors import InputError
from stackroute.runtime.messages import Message

log = logging.getLogger(__name__)

# A routing conversation as the runtime lays it out (`runtime/prompt.py`): system text, the
# request with the root menu, then an answer and the next frame's menu, twice.
CHECK_CONVERSATION: tuple[Message, ...] = (
    Message("system", "You route a user's request through a tree of capabilities. Answer "
                      "with exactly one option name."),
    Message("user", "Request: pay my electricity bill\n\nOptions:\n- payments: move money\n"
                    "- accounts: balances and statements\n- DONE: nothing here applies"),
    Message("assistant", "payments"),
    Message("user", "Options under payments:\n- pay_bill: pay a bill\n- transfer: send money\n"
                    "- DONE: the request is handled at this level; return"),
    Message("assistant", "pay_bill"),
    Message("user", "Result of pay_bill: {\"status\": \"paid\"}\n\nOptions under payments:\n"
                    "- pay_bill: pay a bill\n- DONE: return"),
)
# The calls whose prompts the check renders: each ends with a user turn.
CHECK_CALLS = (2, 4, 6)


class ChatTemplateError(InputError):
    """A chat template file that cannot be read as a template."""

    code = "invalid_chat_template"


@dataclass(frozen=True, kw_only=True)
class TemplateCheck:
    """What `check_template` found: `problem` is None when the template is prefix-stable."""

    problem: str | None
    generation_suffix: str = ""

    @property
    def is_prefix_stable(self) -> bool:
        return self.problem is None


def read_chat_template(path: Path | str) -> str:
    """A template from a file: a Jinja file as is, or a `tokenizer_config.json` (its
    `chat_template`, a string or a list of named templates, of which 'default')."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ChatTemplateError(f"cannot read chat template {path}: {error.strerror}") from None
    if path.suffix.lower() != ".json":
        if not text.strip():
            raise ChatTemplateError(f"chat template {path} is empty")
        return text
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ChatTemplateError(f"chat template {path} is not valid JSON: {error}") from None
    template = data.get("chat_template") if isinstance(data, dict) else None
    if isinstance(template, list):
        named = {str(t.get("name")): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    if not isinstance(template, str) or not template.strip():
        raise ChatTemplateError(f"{path} has no chat_template string (expected a Jinja "
                                "template, or a JSON object with 'chat_template')")
    return template


class TemplateSegments:
    """Token ids of prompts rendered through `template`, segment by segment (see the module);
    thread-safe. Build it with `from_check` after `check_template` passed."""

    def __init__(self, tokenizer: Any, template: str, *, generation_suffix: str,
                 max_cached_segments: int = 4096) -> None:
        self.tokenizer = tokenizer
        self.template = template
        self.generation_ids = self.encode(generation_suffix)
        self._cache: OrderedDict[bytes, tuple[int, ...]] = OrderedDict()
        self._max = max_cached_segments
        self._lock = Lock()
        self._has_warned_drift = False

    def encode(self, text: str) -> tuple[int, ...]:
        return tuple(self.tokenizer.encode(text, add_special_tokens=False))

    def text(self, messages: Sequence[Message], *, add_generation_prompt: bool) -> str:
        if not messages:
            return ""
        return str(self.tokenizer.apply_chat_template(
            [m.to_dict() for m in messages], chat_template=self.template, tokenize=False,
            add_generation_prompt=add_generation_prompt))

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        ids: list[int] = []
        key = b""
        previous: str | None = None  # rendering of messages[:i], when known
        for i, message in enumerate(messages):
            key = _chain(key, message)
            with self._lock:
                cached = self._cache.get(key)
                if cached is not None:
                    self._cache.move_to_end(key)
            if cached is None:
                before = previous if previous is not None \
                    else self.text(messages[:i], add_generation_prompt=False)
                after = self.text(messages[:i + 1], add_generation_prompt=False)
                if not after.startswith(before):
                    return self._whole(messages, i)
                cached = self.encode(after[len(before):])
                with self._lock:
                    self._cache[key] = cached
                    if len(self._cache) > self._max:
                        self._cache.popitem(last=False)
                previous = after
            else:
                previous = None
            ids.extend(cached)
        ids.extend(self.generation_ids)
        return ids

    def _whole(self, messages: Sequence[Message], at: int) -> list[int]:
        """A conversation the template renders unlike the check's: this prompt is encoded
        whole (correct for the model; the prefix cache may miss)."""
        if not self._has_warned_drift:
            self._has_warned_drift = True
            log.warning("the chat template rewrote earlier turns when message %d (%s) was "
                        "added; such prompts are encoded whole and may miss the prefix cache",
                        at, messages[at].role)
        return list(self.encode(self.text(messages, add_generation_prompt=True)))


def check_template(tokenizer: Any, template: str,
                   conversation: Sequence[Message] = CHECK_CONVERSATION,
                   calls: Sequence[int] = CHECK_CALLS) -> TemplateCheck:
    """Whether `template` is prefix-stable on `tokenizer` (see the module); renders
    `conversation[:n]` for each n in `calls` as consecutive routing calls."""
    probe = TemplateSegments(tokenizer, template, generation_suffix="")
    try:
        whole = [probe.text(conversation[:n], add_generation_prompt=True) for n in calls]
        bare = [probe.text(conversation[:n], add_generation_prompt=False) for n in calls]
    except Exception as error:  # a Jinja error, or the template's own raise_exception
        return TemplateCheck(problem=f"the template does not render a routing conversation "
                                     f"(system, user, assistant turns): "
                                     f"{type(error).__name__}: {error}")
    suffixes = {w[len(b):] for w, b in zip(whole, bare, strict=True) if w.startswith(b)}
    if len(suffixes) != 1 or not all(w.startswith(b) for w, b in zip(whole, bare, strict=True)):
        return TemplateCheck(problem="the generation prompt is not the same text after every "
                                     "conversation")
    (suffix,) = suffixes
    tokens = [probe.encode(w) for w in whole]
    for n, (this, after) in enumerate(itertools.pairwise(tokens)):
        if after[:len(this)] != this:
            at = next(i for i, (a, b) in enumerate(zip(this, after, strict=False)) if a != b) \
                if any(a != b for a, b in zip(this, after, strict=False)) else len(after)
            return TemplateCheck(problem=(
                f"call {n + 1}'s tokens are not a prefix of call {n + 2}'s (from token {at} "
                f"of {len(this)}, ids {list(this[at:at + 3])} became "
                f"{list(after[at:at + 3])}: {probe.tokenizer.decode(list(this[at:at + 3]))!r} "
                "is tokenised differently once the next turn follows); the prefix cache would "
                "miss there"))
    segments = TemplateSegments(tokenizer, template, generation_suffix=suffix)
    for n, expected in zip(calls, tokens, strict=True):
        if segments.prompt_ids(conversation[:n]) != list(expected):
            return TemplateCheck(problem=(
                f"turn-by-turn tokens differ from the whole text's tokens for {n} messages "
                "(the tokenizer merges across a turn boundary)"))
    return TemplateCheck(problem=None, generation_suffix=suffix)


def end_of_turn_id(tokenizer: Any, template: str, generation_suffix: str) -> int | None:
    """The token that ends an assistant answer under `template`: the first token after the
    answer's text in its rendering, when that is a special (added) token; else None."""
    sentinel = "Zq7answer"
    conversation = [{"role": "user", "content": "x"},
                    {"role": "assistant", "content": sentinel}]
    try:
        text = str(tokenizer.apply_chat_template(conversation, chat_template=template,
                                                 tokenize=False))
    except Exception:
        return None
    _, found, after = text.partition(generation_suffix + sentinel)
    if not found or not after:
        return None
    first = tokenizer.encode(after, add_special_tokens=False)[:1]
    specials = set(getattr(tokenizer, "all_special_ids", ()) or ())
    added = set(getattr(tokenizer, "added_tokens_decoder", {}) or {})
    if first and (first[0] in specials or first[0] in added):
        return int(first[0])
    return None


def _chain(key: bytes, message: Message) -> bytes:
    """A digest of the conversation up to and including `message`."""
    h = hashlib.blake2b(key, digest_size=16)
    h.update(message.role.encode())
    h.update(b"\0")
    h.update(message.content.encode())
    return h.digest()
