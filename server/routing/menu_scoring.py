"""One scored menu: the engine's constrained choice under the evidence prior and the neutral
contrast, with the raw and calibrated distributions recovered, and a memo of past choices.

Both corrections are additive in log space, so they go to the engine together as one
`option_bias`; the engine returns `p(o) * exp(bias(o))` renormalised, from which the model's
own distribution is `p_final(o) * exp(-bias(o))` renormalised. The memo is keyed by the exact
prompt, options and bias: a hypothetical frame explored by the beam is the very prompt the run
sends when it enters that frame, so that call is answered from the memo (cost counted once).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from stackroute.runtime.prompt import Prompt
from stackroute.runtime.router import RoutingRequest
from stackroute.runtime.usage import Usage
from stackroute.server.embeddings.leaf_index import Evidence, EvidenceSource
from stackroute.server.engines.base import Engine, MenuResult
from stackroute.server.routing.contrast import NeutralContrast, is_fresh, needs_contrast
from stackroute.server.routing.finish import FinishCheck
from stackroute.server.routing.lru import Lru
from stackroute.server.routing.prior import MenuPrior, PriorOptions, menu_prior

if TYPE_CHECKING:
    from stackroute.server.routing.path_prefetch import DraftedPath, Prefetched


@dataclass(frozen=True)
class ScoredMenu:
    """A menu decision with everything that went into it."""

    result: MenuResult  # the engine's choice and final distribution, bias included
    bias: dict[str, float]  # total additive log bias sent to the engine
    prior: MenuPrior | None = None
    contrast: dict[str, float] | None = None
    evidence: Evidence | None = None
    usage: Usage = field(default_factory=Usage)  # what this scoring cost now (0 if reused)
    is_reused: bool = False
    speculation: dict[str, Any] | None = None  # a path verified ahead from here

    @property
    def choice(self) -> str:
        return self.result.choice

    @property
    def probabilities(self) -> dict[str, float]:
        return self.result.probabilities

    def raw_probabilities(self) -> dict[str, float]:
        """The model's own distribution over the menu, without prior or contrast."""
        return _tilt(self.result.probabilities, {o: -b for o, b in self.bias.items()})

    def calibrated_probabilities(self) -> dict[str, float]:
        """The model's distribution with the neutral contrast only (no evidence prior)."""
        if self.prior is None:
            return self.result.probabilities
        return _tilt(self.result.probabilities, {o: -b for o, b in self.prior.bias.items()})

    def ranked_children(self, children: tuple[str, ...]) -> list[tuple[str, float]]:
        probabilities = self.result.probabilities
        return sorted(((c, probabilities.get(c, 0.0)) for c in children),
                      key=lambda kv: -kv[1])

    def detail(self, *, top_k: int) -> dict[str, Any]:
        """What the trace records: prior, evidence top-k, raw and calibrated picks."""
        out: dict[str, Any] = {"margin": self.result.margin}
        if self.bias:
            raw = self.raw_probabilities()
            out["raw"] = _top(raw, top_k)
            if self.contrast is not None:
                out["calibrated"] = _top(self.calibrated_probabilities(), top_k)
        if self.prior is not None:
            ranked = sorted(self.prior.bias.items(), key=lambda kv: -kv[1])[:top_k]
            out["prior"] = {o: round(b, 3) for o, b in ranked}
        if self.evidence is not None:
            out["evidence_top"] = [[p, round(s, 4)] for p, s in self.evidence.top(top_k)]
        if self.is_reused:
            out["is_reused"] = True
        if self.speculation is not None:
            out["speculation"] = self.speculation
        return out


class MenuScorer:
    """Scores menus for one catalog with one engine (evidence and contrast optional)."""

    def __init__(self, engine: Engine, *, evidence: EvidenceSource | None = None,
                 prior: PriorOptions | None = None, contrast: NeutralContrast | None = None,
                 prefetcher: Prefetcher | None = None, focus: FinishCheck | None = None,
                 max_memo: int = 4096) -> None:
        self.engine = engine
        self.prefetcher = prefetcher
        self.focus = focus
        self.evidence = evidence
        self.prior_options = prior
        self.contrast = contrast
        self.max_memo = max_memo
        self._memo: Lru[tuple[Prompt, tuple[str, ...], tuple[tuple[str, float], ...]],
                        MenuResult] = Lru(max_entries=max_memo)

    def evidence_for(self, request: RoutingRequest) -> Evidence | None:
        """The request's leaf evidence; in a request of several asks, the evidence of the ask
        the next call serves (so calls follow the request's order: "export X, then cancel
        Y" exports first, though the whole request may match cancel best)."""
        return self.evidence_for_task(request.task, request.calls)

    def evidence_for_task(self, task: str, calls: tuple[str, ...]) -> Evidence | None:
        """`evidence_for` by the request's text and the run's calls so far."""
        if self.evidence is None:
            return None
        part = None if self.focus is None else self.focus.current_part(task, calls)
        return self.evidence.for_request(part or task)

    def bias_for(self, request: RoutingRequest) -> MenuBias:
        """The additive log bias on `request`'s options: the evidence prior, plus the neutral
        contrast on a frame's first call (`needs_contrast`; a model call the first time a
        menu is seen)."""
        started = time.perf_counter()
        evidence = self.evidence_for(request)
        prior = None
        bias: dict[str, float] = {}
        if evidence is not None and self.prior_options is not None \
                and self.prior_options.weight > 0:
            prior = menu_prior(evidence, request.node, request.menu, calls=request.calls,
                               options=self.prior_options)
            bias = dict(prior.bias)
        # the request's embedding and the prior are part of the decision's latency
        usage = Usage(latency_ms=(time.perf_counter() - started) * 1e3)
        contrast = None
        if self.contrast is not None and needs_contrast(request):
            contrast, contrast_usage = self.contrast.bias(request)
            usage = usage + contrast_usage
            bias = {o: bias.get(o, 0.0) + contrast.get(o, 0.0) for o in request.menu.options}
        return MenuBias(bias=bias, prior=prior, contrast=contrast, evidence=evidence,
                        usage=usage)

    def score(self, request: RoutingRequest) -> ScoredMenu:
        """The menu scored under its bias: from the memo when this very (prompt, options,
        bias) was scored or verified before, else one engine call; a fresh menu may first
        verify a drafted path from here into the memo (`_prefetch`)."""
        menu_bias = self.bias_for(request)
        bias, usage = menu_bias.bias, menu_bias.usage
        speculation: dict[str, Any] | None = None
        fetched = self._prefetch(request, bias)
        if fetched is not None:
            usage, speculation = usage + fetched.usage, fetched.detail
        key = _memo_key(request, bias)
        result = self._memo.get(key)
        is_reused = result is not None
        if result is None:
            result = self.engine.choose(request.prompt, request.menu.options,
                                        option_bias=bias or None)
            usage = usage + result.usage
            self._memo.put(key, result)
        return ScoredMenu(result=result, bias=bias, prior=menu_bias.prior,
                          contrast=menu_bias.contrast, evidence=menu_bias.evidence,
                          usage=usage, is_reused=is_reused and speculation is None,
                          speculation=speculation)


    def _prefetch(self, request: RoutingRequest, bias: Mapping[str, float],
                  ) -> Prefetched | None:
        """A path drafted from a fresh, unscored menu, verified in one pass with every
        level under the bias this scorer gives it; the kept levels go into the memo."""
        prefetcher = self.prefetcher
        if prefetcher is None or not is_fresh(request) \
                or self._memo.get(_memo_key(request, bias)) is not None:
            return None
        path = prefetcher.draft(request)
        if path is None:
            return None
        biases: list[Mapping[str, float]] = [bias]
        usage = Usage()
        for drafted in path.requests[1:]:
            level_bias = self.bias_for(drafted)
            biases.append(level_bias.bias)
            usage = usage + level_bias.usage
        fetched = prefetcher.verify(request, path, biases, usage)
        if fetched is not None:
            for drafted, level_bias_used, result in fetched.kept:
                self._memo.put(_memo_key(drafted, level_bias_used), result)
        return fetched


@dataclass(frozen=True)
class MenuBias:
    bias: dict[str, float]
    prior: MenuPrior | None
    contrast: dict[str, float] | None
    evidence: Evidence | None
    usage: Usage  # the request's embedding, the prior, a first contrast call


class Prefetcher(Protocol):
    """Drafts a path and verifies it under the biases given (`path_prefetch.py`)."""

    def draft(self, request: RoutingRequest) -> DraftedPath | None: ...

    def verify(self, request: RoutingRequest, path: DraftedPath,
               biases: Sequence[Mapping[str, float]], usage: Usage) -> Prefetched | None: ...


def _memo_key(request: RoutingRequest, bias: Mapping[str, float],
              ) -> tuple[Prompt, tuple[str, ...], tuple[tuple[str, float], ...]]:
    return request.prompt, request.menu.options, tuple(sorted(bias.items()))


def _tilt(probabilities: Mapping[str, float], bias: Mapping[str, float]) -> dict[str, float]:
    logs = {o: math.log(max(p, 1e-300)) + bias.get(o, 0.0) for o, p in probabilities.items()}
    top = max(logs.values())
    total = sum(math.exp(v - top) for v in logs.values())
    return {o: math.exp(v - top) / total for o, v in logs.items()}


def _top(probabilities: Mapping[str, float], k: int) -> dict[str, float]:
    ranked = sorted(probabilities.items(), key=lambda kv: -kv[1])[:k]
    return {o: round(p, 4) for o, p in ranked}
