"""Menu constraints: a menu's option names compiled to a token trie, and the choice over it.

The model answers a menu as the whole assistant turn: an option name, then the end token
(`<|im_end|>` for ChatML). Each option's sequence is its canonical tokens, `tokenizer.encode(
name, add_special_tokens=False)`, plus the end token. For byte-level BPE that is also how the
name tokenises inside the rendered turn, because the template's `"assistant\\n"` ends in a
newline that the pre-tokenizer always splits off and the end token is a special token; a name
that starts with whitespace would merge with that newline, so such names are rejected.

>>> from tokenizers import Tokenizer, models
>>> vocab = {c: i for i, c in enumerate("DONEapy")} | {"pa": 7, "pay": 8}
>>> tokenizer = Tokenizer(models.BPE(vocab, [("p", "a"), ("pa", "y")]))
>>> menu = compile_menu(["pay", "paya", "DONE"], tokenizer, end_token_id=9)
>>> menu.sequence("paya"), menu.flat_token_ids, menu.branch_points
((8, 4, 9), (0, 1, 2, 3, 8, 4), (-1, 4))
>>> import numpy as np
>>> logits = {-1: np.array([0.0] * 8 + [2.0, 0.0]), 4: np.array([0.0] * 9 + [1.0])}
>>> choice = menu.decide(lambda node: logits[node])
>>> choice.choice, choice.num_branch_points_on_path, choice.num_forced_tokens
('pay', 2, 0)
>>> round(sum(np.exp(list(choice.option_logprobs.values()))).item(), 6)
1.0
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray
from stackroute.grammars.tokenizer import encode_batch
from stackroute.grammars.trie import ROOT, TokenTrie

LogitsAt = Callable[[int], NDArray[np.floating]]
"""`logits_at(node)`: the raw logits row `[vocab]` for the distribution after trie node `node`
(`ROOT` = -1: the last prompt position; else a flat index)."""


@dataclass(frozen=True, slots=True)
class MenuChoice:
    """The outcome of one menu decision.

    `option_logprobs` holds every option's log-probability (the sum of the conditional
    log-probs along its path, renormalised over the trie's children at each branch point, bias
    included), so their exponentials sum to 1. `num_branch_points_on_path +
    num_forced_tokens` is the chosen sequence's length (end token included). `margin` is the
    smallest gap, in log-prob, between the best and second-best child over the branch points
    on the chosen path (the closest call, bias included; `inf` when the path has no branch
    point).
    """

    choice: str
    option_logprobs: dict[str, float]
    num_branch_points_on_path: int
    num_forced_tokens: int
    margin: float

    @property
    def probability(self) -> float:
        return math.exp(self.option_logprobs[self.choice])


@dataclass(frozen=True)
class CompiledMenu:
    """An immutable, shareable menu constraint; build it with `compile_menu`.

    The flat layout (`flat_*`) covers every trie node that is fed to the model: its position
    after the prompt is `prompt_len + flat_depth[i] - 1`, and it attends to the prompt and to
    the nodes `ancestor_matrix()[i]` marks.
    """

    options: tuple[str, ...]
    sequences: tuple[tuple[int, ...], ...]
    """Canonical tokens + end token, by option index."""
    end_token_id: int
    trie: TokenTrie

    @property
    def flat_token_ids(self) -> tuple[int, ...]:
        return self.trie.token_ids

    @property
    def flat_parent(self) -> tuple[int, ...]:
        return self.trie.parent

    @property
    def flat_depth(self) -> tuple[int, ...]:
        return self.trie.depth

    @property
    def num_nodes(self) -> int:
        return self.trie.num_nodes

    @property
    def branch_points(self) -> tuple[int, ...]:
        """Nodes (`ROOT` = -1 first) with two or more children: the only ones whose logits
        `decide` asks for."""
        return self.trie.branch_points

    def ancestor_matrix(self) -> NDArray[np.bool_]:
        """`[num_nodes, num_nodes]` bool, row i = the trie nodes flat node i may attend to."""
        return self.trie.ancestor_matrix()

    def sequence(self, option: str) -> tuple[int, ...]:
        """The token ids that answer `option`: canonical tokens, then the end token."""
        return self.sequences[self._option_index[option]]

    def decide(
        self, logits_at: LogitsAt, *, option_bias: Mapping[str, float] | None = None
    ) -> MenuChoice:
        """Constrained greedy choice, with every option's log-probability.

        Calls `logits_at` once per branch point, in `branch_points` order. Ties go to the
        lowest token id. `option_bias` is an additive log-space prior per option (missing
        options get 0), OpenAI's `logit_bias` lifted from tokens to options: the result is
        the model's distribution tilted to `p(option) * exp(bias)`, renormalised. The walk
        stays token by token: at a branch point child `c` of node `n` gets the log-offset
        `V(c) - V(n)`, where `V(x) = log sum over options o under x of p(o | x) exp(bias(o))`
        uses the model's own distribution below `x` (its logits come from the same pass). So
        equal biases change nothing, and where each child leads to a single option this is
        just that option's bias added to the child's logit.
        """
        child_logprobs = {
            node: self._branch_logprobs(node, logits_at(node))
            for node in self.trie.branch_points
        }
        if option_bias:
            child_logprobs = self._tilted(child_logprobs, self._bias_by_option(option_bias))
        option, num_branch_points, num_forced, margin = self._greedy_walk(child_logprobs)
        return MenuChoice(
            choice=self.options[option],
            option_logprobs=self._option_logprobs(child_logprobs),
            num_branch_points_on_path=num_branch_points,
            num_forced_tokens=num_forced,
            margin=margin,
        )

    @cached_property
    def _option_index(self) -> dict[str, int]:
        return {name: index for index, name in enumerate(self.options)}

    @cached_property
    def _branch_token_ids(self) -> dict[int, NDArray[np.intp]]:
        return {
            node: np.array([edge.token_id for edge in self.trie.edges(node)], dtype=np.intp)
            for node in self.trie.branch_points
        }

    def _bias_by_option(self, option_bias: Mapping[str, float]) -> NDArray[np.float64]:
        unknown = sorted(set(option_bias) - set(self.options))
        if unknown:
            raise ValueError(f"option_bias names options not on the menu: {unknown}")
        bias = np.zeros(len(self.options), dtype=np.float64)
        for name, value in option_bias.items():
            if not math.isfinite(value):
                raise ValueError(f"option_bias for {name!r} is {value}; biases must be finite")
            bias[self._option_index[name]] = value
        return bias

    def _branch_logprobs(self, node: int, row: NDArray[np.floating]) -> NDArray[np.float64]:
        """Log-softmax of the model's logits over `node`'s children only."""
        token_ids = self._branch_token_ids[node]
        logits = np.asarray(row)
        if logits.ndim != 1 or logits.shape[0] <= int(token_ids.max()):
            raise ValueError(
                f"logits at node {node} have shape {logits.shape}; expected one row covering "
                f"token id {int(token_ids.max())}"
            )
        scores = logits[token_ids].astype(np.float64)
        best = scores.max()
        if not np.isfinite(best) or np.isnan(scores).any():
            raise ValueError(f"logits at node {node} give no usable score to the menu's tokens")
        shifted = scores - best
        result: NDArray[np.float64] = shifted - math.log(float(np.exp(shifted).sum()))
        return result

    def _tilted(
        self, child_logprobs: Mapping[int, NDArray[np.float64]], bias: NDArray[np.float64]
    ) -> dict[int, NDArray[np.float64]]:
        """Branch-point log-probs of the distribution tilted by `exp(bias)` (see `decide`)."""
        trie = self.trie
        values = [0.0] * (trie.num_nodes + 1)  # V(node) by node + 1; root at 0
        tilted: dict[int, NDArray[np.float64]] = {}
        for node in range(trie.num_nodes - 1, ROOT - 1, -1):
            # Reverse preorder: every child's V is known before its parent's.
            below = [
                float(bias[edge.sequence]) if edge.sequence is not None
                else values[_slot(edge.node)]
                for edge in trie.edges(node)
            ]
            logprobs = child_logprobs.get(node)
            if logprobs is None:  # a forced token: V passes straight through
                values[node + 1] = below[0]
                continue
            joint = logprobs + np.array(below)
            value = float(np.logaddexp.reduce(joint))
            values[node + 1] = value
            tilted[node] = joint - value
        return tilted

    def _greedy_walk(
        self, child_logprobs: Mapping[int, NDArray[np.float64]]
    ) -> tuple[int, int, int, float]:
        """(option index, branch points on path, forced tokens, margin) of the greedy path."""
        node, num_branch_points, num_forced, margin = ROOT, 0, 0, math.inf
        while True:
            edges = self.trie.edges(node)
            if len(edges) == 1:
                best = 0
                num_forced += 1
            else:
                logprobs = child_logprobs[node]
                best = int(np.argmax(logprobs))  # first maximum = lowest token id
                num_branch_points += 1
                runner_up = float(np.delete(logprobs, best).max())
                margin = min(margin, float(logprobs[best]) - runner_up)
            edge = edges[best]
            if edge.sequence is not None:
                return edge.sequence, num_branch_points, num_forced, margin
            if edge.node is None:
                raise RuntimeError("trie edge with neither node nor sequence")  # our bug
            node = edge.node

    def _option_logprobs(
        self, child_logprobs: Mapping[int, NDArray[np.float64]]
    ) -> dict[str, float]:
        trie = self.trie
        reach = [0.0] * (trie.num_nodes + 1)  # log-prob of reaching each node, root at 0
        by_option = [0.0] * len(self.options)
        for node in range(ROOT, trie.num_nodes):
            # Preorder: a node's own log-prob is final before its children are visited.
            base = reach[node + 1]
            logprobs = child_logprobs.get(node)
            for position, edge in enumerate(trie.edges(node)):
                value = base if logprobs is None else base + float(logprobs[position])
                if edge.sequence is not None:
                    by_option[edge.sequence] = value
                elif edge.node is not None:
                    reach[edge.node + 1] = value
        return dict(zip(self.options, by_option, strict=True))


def _slot(node: int | None) -> int:
    if node is None:
        raise RuntimeError("trie edge with neither node nor sequence")  # our bug
    return node + 1


def compile_menu(options: Sequence[str], tokenizer: object, *, end_token_id: int) -> CompiledMenu:
    """Compile one menu. Empty menus, duplicate names, names that are empty or start with
    whitespace, names whose tokens contain the end token, and names that tokenise identically
    raise ValueError naming them."""
    return compile_menus([options], tokenizer, end_token_id=end_token_id)[0]


def compile_menus(
    menus: Sequence[Sequence[str]], tokenizer: object, *, end_token_id: int
) -> list[CompiledMenu]:
    """Compile many menus, tokenising every distinct name once in a single batch."""
    for options in menus:
        _check_options(options)
    names = sorted({name for options in menus for name in options})
    tokens_by_name = dict(zip(names, encode_batch(tokenizer, names), strict=True))
    return [_compile(tuple(options), tokens_by_name, end_token_id) for options in menus]


def _check_options(options: Sequence[str]) -> None:
    if isinstance(options, str):
        raise TypeError(f"a menu is a sequence of option names, not the string {options!r}")
    if not options:
        raise ValueError("a menu needs at least one option; got none")
    duplicates = sorted(name for name, count in Counter(options).items() if count > 1)
    if duplicates:
        raise ValueError(f"menu options must be unique; duplicated: {duplicates}")
    for name in options:
        if not isinstance(name, str) or not name:
            raise ValueError(f"menu option names must be non-empty strings; got {name!r}")
        if name[0].isspace():
            # BPE would merge it with the newline that ends "assistant\n" in the rendered
            # turn, so the generated tokens would not be the ones a re-render produces.
            raise ValueError(f"menu option {name!r} starts with whitespace")


def _compile(
    options: tuple[str, ...], tokens_by_name: Mapping[str, list[int]], end_token_id: int
) -> CompiledMenu:
    sequences: list[tuple[int, ...]] = []
    owner: dict[tuple[int, ...], str] = {}
    for name in options:
        tokens = tuple(tokens_by_name[name])
        if not tokens:
            raise ValueError(f"menu option {name!r} tokenises to no tokens")
        if end_token_id in tokens:
            raise ValueError(f"menu option {name!r} tokenises to include the end token")
        if tokens in owner:
            raise ValueError(
                f"menu options {owner[tokens]!r} and {name!r} tokenise identically: {tokens}"
            )
        owner[tokens] = name
        sequences.append((*tokens, end_token_id))
    return CompiledMenu(
        options=options,
        sequences=tuple(sequences),
        end_token_id=end_token_id,
        trie=TokenTrie.from_sequences(sequences),
    )
