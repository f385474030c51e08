"""What an OpenAI-style upstream offers for constraining a menu answer, detected at start, and
how a menu is asked and read back under each.

The ladder, best first (`ConstraintApi`):
1. `structured_outputs`: vLLM's `{"structured_outputs": {"choice": [...]}}` (and JSON and
   regex); `stackroute serve` takes it too. The answer is the option's text.
2. `json_schema`: OpenAI's `response_format` with a JSON schema, the menu as a string enum
   (`{"type": "string", "enum": [...]}`): SGLang, LM Studio, Ollama, llama.cpp's server. The
   answer is a JSON string; its logprobs are read without the quotes.
3. `grammar`: llama.cpp's server's GBNF `grammar` field, `root ::= "a" | "b"`. The answer is
   the option's text.
4. `none`: nothing honoured: a menu cannot be answered (a typed error says so); free text and
   JSON by `response_format` are still tried.

`probe` sends each rung one tiny menu (two made-up option names no model writes by chance,
`max_tokens` just enough, temperature 0), first with logprobs and, if the upstream refuses
them, without. A rung counts only if the answer is exactly one option with
`finish_reason == "stop"`: an upstream that ignores the field (vLLM ignores unknown fields;
`stackroute serve` ignores them unless `strict_openai`) answers free text and fails it. A
refusal (4xx) or a wrong answer moves down the ladder and is logged; an upstream that is
down or slow stops the probe, and the engine keeps the rung it assumed (never fails start).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from stackroute.server.engines.option_scoring import TokenStep, max_answer_tokens
from stackroute.server.engines.remote_errors import (
    RemoteEngineError,
    RemoteFeatureError,
    RemoteRejectedError,
)

log = logging.getLogger(__name__)

PROBE_OPTIONS = ("zebra_kiln", "quartz_fjord")  # names no unconstrained answer spells
PROBE_MESSAGES = [{"role": "user", "content": "Answer with one of: zebra_kiln, quartz_fjord."}]


class ConstraintApi(StrEnum):
    STRUCTURED_OUTPUTS = "structured_outputs"
    JSON_SCHEMA = "json_schema"
    GRAMMAR = "grammar"
    NONE = "none"


LADDER = (ConstraintApi.STRUCTURED_OUTPUTS, ConstraintApi.JSON_SCHEMA, ConstraintApi.GRAMMAR)


@dataclass(frozen=True, kw_only=True)
class UpstreamFeatures:
    """The constraint API the engine uses, whether the upstream sends logprobs, whether this
    was probed (False: assumed), and why each rung above the chosen one was passed over."""

    constraints: ConstraintApi = ConstraintApi.STRUCTURED_OUTPUTS
    has_logprobs: bool = True
    is_probed: bool = False
    notes: tuple[str, ...] = ()

    def as_pairs(self) -> tuple[tuple[str, str], ...]:
        return (("constraints", self.constraints.value),
                ("logprobs", "yes" if self.has_logprobs else "no"),
                ("constraints_source", "probed" if self.is_probed else "assumed"))


def parse_constraint_api(value: str) -> ConstraintApi | None:
    """`auto` (None: probe) or a rung's name; anything else is a ValueError naming them."""
    if value == "auto":
        return None
    try:
        return ConstraintApi(value)
    except ValueError:
        raise ValueError(f"remote constraints must be auto or one of "
                         f"{', '.join(a.value for a in ConstraintApi)}; got {value!r}") from None


def menu_body(api: ConstraintApi, options: Sequence[str]) -> dict[str, Any]:
    """The request fields that constrain an answer to one of `options` under `api`."""
    if api is ConstraintApi.STRUCTURED_OUTPUTS:
        return {"structured_outputs": {"choice": list(options)}}
    if api is ConstraintApi.JSON_SCHEMA:
        return {"response_format": {"type": "json_schema", "json_schema": {
            "name": "menu", "schema": {"type": "string", "enum": list(options)},
            "strict": True}}}
    if api is ConstraintApi.GRAMMAR:
        return {"grammar": gbnf_choice(options)}
    raise RemoteFeatureError("the upstream honours no constraint a menu can use (probed: "
                             "structured_outputs, response_format json_schema, GBNF grammar)")


def gbnf_choice(options: Sequence[str]) -> str:
    r"""A GBNF grammar whose only sentences are `options` (llama.cpp's escapes).

    >>> gbnf_choice(["pay", 'say "hi"'])
    'root ::= "pay" | "say \\"hi\\""'
    """
    def literal(text: str) -> str:
        escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") \
            .replace("\r", "\\r").replace("\t", "\\t")
        return f'"{escaped}"'

    return "root ::= " + " | ".join(literal(o) for o in options)


def menu_answer(api: ConstraintApi, text: str) -> str:
    """The option an answer under `api` names (a JSON string's value under json_schema)."""
    if api is not ConstraintApi.JSON_SCHEMA:
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text  # not JSON: the caller's check finds it is no option
    return value if isinstance(value, str) else text


def unquoted_steps(steps: Sequence[TokenStep]) -> list[TokenStep]:
    """The token steps of a JSON string answer as the steps of its bare value: whitespace and
    the opening quote dropped (forced by the schema), the closing quote read as the end of
    the answer. Alternatives that cannot continue the string are dropped with it.

    >>> s = [TokenStep(b'"', 0.0), TokenStep(b"pay", -0.1, ((b"pay", -0.1), (b"ask", -2.4))),
    ...      TokenStep(b'"', -0.05, ((b'"', -0.05), (b"ment", -3.0)))]
    >>> [(t.token, t.alternatives) for t in unquoted_steps(s)]
    [(b'pay', ((b'pay', -0.1), (b'ask', -2.4))), (b'', ((b'', -0.05), (b'ment', -3.0)))]
    """
    out: list[TokenStep] = []
    is_open = False
    for step in steps:
        if not is_open:
            head = step.token.lstrip()
            if not head.startswith(b'"'):
                continue  # leading whitespace: no option differs by it
            is_open = True
            rest = head[1:]
            if not rest:
                continue  # the quote alone: forced
            alternatives = tuple((t.lstrip()[1:], lp) for t, lp in step.alternatives
                                 if t.lstrip().startswith(b'"') and t.lstrip()[1:])
            out.append(TokenStep(rest, step.logprob, alternatives))
            continue
        if step.token.startswith(b'"'):  # the closing quote: the answer ends here
            alternatives = tuple((b"" if t.startswith(b'"') else t, lp)
                                 for t, lp in step.alternatives)
            out.append(TokenStep(b"", step.logprob, alternatives))
            break
        out.append(step)
    return out


Complete = Callable[[dict[str, Any]], Mapping[str, Any]]


def probe(complete: Complete, ladder: Sequence[ConstraintApi] = LADDER, *,
          assumed: UpstreamFeatures | None = None) -> UpstreamFeatures:
    """The best rung of `ladder` the upstream honours (see the module); `complete` posts a
    chat completion body (without `model`) and returns the JSON answer."""
    notes: list[str] = []
    for api in ladder:
        try:
            verdict = _try_rung(complete, api)
        except (RemoteRejectedError, RemoteFeatureError) as error:  # a 4xx: not this rung
            verdict = f"refused: {error}"
        except RemoteEngineError as error:  # down, slow, or broken: no verdict at all
            kept = assumed or UpstreamFeatures()
            log.warning("probing the upstream's constraint APIs stopped at %s (%s); keeping "
                        "%s", api.value, error, kept.constraints.value)
            return UpstreamFeatures(constraints=kept.constraints,
                                    has_logprobs=kept.has_logprobs, is_probed=False,
                                    notes=(*notes, f"{api.value}: no verdict: {error}"))
        if isinstance(verdict, bool):
            features = UpstreamFeatures(constraints=api, has_logprobs=verdict, is_probed=True,
                                        notes=tuple(notes))
            log.info("the upstream answers menus by %s (logprobs: %s)%s", api.value,
                     "yes" if verdict else "no",
                     f"; passed over: {'; '.join(notes)}" if notes else "")
            return features
        notes.append(f"{api.value}: {verdict}")
        log.warning("the upstream does not honour %s: %s", api.value, verdict)
    log.warning("the upstream honours no constraint API a menu can use; menus will fail "
                "(%s)", "; ".join(notes))
    return UpstreamFeatures(constraints=ConstraintApi.NONE, has_logprobs=False,
                            is_probed=True, notes=tuple(notes))


def _try_rung(complete: Complete, api: ConstraintApi) -> bool | str:
    """True/False (honoured; with/without logprobs), or why not."""
    body: dict[str, Any] = {"messages": PROBE_MESSAGES, "temperature": 0.0,
                            "max_tokens": max_answer_tokens(PROBE_OPTIONS) + 2,
                            **menu_body(api, PROBE_OPTIONS)}
    try:
        data = complete({**body, "logprobs": True, "top_logprobs": 2})
    except (RemoteRejectedError, RemoteFeatureError) as error:
        if "logprob" not in str(error).lower():
            raise
        data = complete(body)  # refused logprobs only: the rung without them
    try:
        choice = data["choices"][0]
        text = str(choice["message"]["content"] or "")
        finish = choice.get("finish_reason")
    except (KeyError, IndexError, TypeError) as error:
        return f"an answer of unexpected shape ({error!r})"
    answer = menu_answer(api, text)
    if answer not in PROBE_OPTIONS or finish != "stop":
        return (f"ignored: answered {text[:80]!r} (finish_reason {finish!r}) to a menu of "
                f"{list(PROBE_OPTIONS)}")
    return bool((choice.get("logprobs") or {}).get("content"))
