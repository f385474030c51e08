"""The tree checks of taxonomy governance that need no embeddings: names (`similar_names`,
`repeated_names`) and structure (`structural_findings`: wide menus, deep trees, single-child
chains, missing descriptions). `taxonomy.overlap_findings` runs them with the embedding
checks."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence

from stackroute.runtime.tree import CapabilityTree, Node
from stackroute.server.embeddings.words import name_tokens, split_name
from stackroute.server.tools.clustering import levels_needed
from stackroute.server.tools.taxonomy import (
    Finding,
    FindingKind,
    OverlapThresholds,
    Severity,
)


def similar_names(tree: CapabilityTree, *, max_pairwise: int = 500) -> Iterable[Finding]:
    """Sibling router names that differ only by form, or where one contains the other; sibling
    leaf names equal after stemming. (Leaves are compared by hash, routers pairwise up to
    `max_pairwise` siblings: a 4,000-leaf flat menu would be 8M string comparisons.)"""
    for parent in tree.routers():
        drop = split_name(parent.name) if parent.depth > 0 else []
        leaves = [c for c in parent.children if c.is_leaf]
        routers = [c for c in parent.children if not c.is_leaf]
        by_tokens: dict[tuple[str, ...], list[Node]] = defaultdict(list)
        for leaf in leaves:
            by_tokens[name_tokens(leaf.name)].append(leaf)
        for key, group in by_tokens.items():
            for a, b in itertools.pairwise(group) if key else ():
                yield _same_names(a, b, 1.0)
        if not 2 <= len(routers) <= max_pairwise:
            continue
        full = [name_tokens(c.name) for c in routers]
        # "Same" ignores the parent's words (Media/Journalism vs Media/Media_and_Journalism);
        # "contains" does not (Advertising/Social_media_advertising vs …_management).
        own = [name_tokens(c.name, drop=drop) or t for c, t in zip(routers, full, strict=True)]
        for i, j in itertools.combinations(range(len(routers)), 2):
            a, b = routers[i], routers[j]
            if not full[i] or not full[j]:  # names of stop words only ("a", "the")
                continue
            same = compare_names(own[i], own[j])
            if same is not None and same[0] == "same":
                yield _same_names(a, b, same[1])
                continue
            contains = compare_names(full[i], full[j])
            if contains is None or contains[0] != "contains":
                continue
            short, long_ = (a, b) if len(full[i]) < len(full[j]) else (b, a)
            yield Finding(
                FindingKind.SIMILAR_NAMES, Severity.INFO, (short.path_str, long_.path_str),
                f"{long_.name!r} is its sibling {short.name!r} plus more words: a broad and a "
                "narrow topic side by side",
                f"nest {long_.name!r} under {short.name!r}, or rename {short.name!r} to what "
                f"it holds besides {long_.name!r}", score=contains[1])


def _same_names(a: Node, b: Node, score: float) -> Finding:
    return Finding(
        FindingKind.SIMILAR_NAMES, Severity.WARNING, (a.path_str, b.path_str),
        f"sibling names {a.name!r} and {b.name!r} differ only in form",
        f"merge them into one {'tool' if a.is_leaf else 'router'}, or rename both to what "
        "separates them", score=score)


def compare_names(a: Sequence[str], b: Sequence[str]) -> tuple[str, float] | None:
    """`("same", score)` when the stemmed words pair up one to one, each alike (equal, or
    differing only in a short ending: "analysis"/"analytics"); `("contains", share)` when every
    word of one is among the other's (share: the shorter's words over the longer's); else None.

    >>> compare_names(("communication",), ("communication",))
    ('same', 1.0)
    >>> compare_names(("data", "analysis"), ("data", "analytic"))
    ('same', 0.9)
    >>> compare_names(("travel",), ("travel", "tourism"))
    ('contains', 0.5)
    >>> compare_names(("hematology",), ("rheumatology",)) is None
    True
    """
    if tuple(a) == tuple(b) or sorted(a) == sorted(b):
        return "same", 1.0
    if len(a) == len(b) and all(_alike(x, y) for x, y in zip(a, b, strict=True)):
        return "same", 0.9
    sa, sb = set(a), set(b)
    if sa < sb or sb < sa:
        return "contains", round(min(len(sa), len(sb)) / max(len(sa), len(sb)), 4)
    return None


def _alike(x: str, y: str) -> bool:
    """Equal, or two words of six letters or more that share all but the last three letters
    of the longer ("adapted"/"adaptive"; not "roman"/"romance")."""
    if x == y:
        return True
    if min(len(x), len(y)) < 6:
        return False
    shared = next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q),
                  min(len(x), len(y)))
    return shared >= max(5, max(len(x), len(y)) - 3)


def repeated_names(tree: CapabilityTree) -> Iterable[Finding]:
    """One router name (after stemming) under several parents."""
    homes: dict[tuple[str, ...], list[Node]] = defaultdict(list)
    for node in tree.routers():
        if node.depth > 0:
            homes[tuple(sorted(name_tokens(node.name)))].append(node)
    for nodes in homes.values():
        if len({n.path[:-1] for n in nodes}) < 2:
            continue
        nodes.sort(key=lambda n: (n.depth, n.path))
        yield Finding(
            FindingKind.REPEATED_NAME, Severity.INFO, tuple(n.path_str for n in nodes),
            f"{nodes[0].name!r} is a router in {len(nodes)} places: a request about it can "
            "go down any of them",
            f"give it one home (merge the {len(nodes)} routers, e.g. into "
            f"{nodes[0].path_str!r}), or rename each to what is specific to its parent",
            score=float(len(nodes)))


def structural_findings(tree: CapabilityTree,
                        thresholds: OverlapThresholds) -> Iterable[Finding]:
    """Wide menus, leaves too deep, single-child chains, nodes without a description."""
    too_deep: dict[tuple[str, ...], list[Node]] = defaultdict(list)
    for node in tree.nodes():
        if node.depth > 0 and not node.description.strip():
            yield Finding(FindingKind.MISSING_DESCRIPTION, Severity.WARNING, (node.path_str,),
                          "no description: the model routes by descriptions",
                          "write one sentence in the words a user would use")
        if node.is_leaf and node.depth > thresholds.max_depth:
            too_deep[node.path[:thresholds.max_depth]].append(node)
        n = len(node.children)
        if n > thresholds.max_menu:
            k = round(n / 9)  # routers of 6-12 options each
            how = (f"under about {k} routers of 6-12" if k <= 12 else
                   f"into a tree of routers of 6-12 ({levels_needed(n, 12)} levels)")
            yield Finding(FindingKind.WIDE_MENU, Severity.WARNING, (node.path_str,),
                          f"menu of {n} options (> {thresholds.max_menu}): every routing call "
                          "here reads all of them",
                          f"group the {n} children {how}; `stackroute build-tree` proposes "
                          "one", score=float(n))
        if n == 1 and _starts_chain(tree, node):
            chain = [node]
            while len(chain[-1].children) == 1 and not chain[-1].children[0].is_leaf \
                    and len(chain[-1].children[0].children) == 1:
                chain.append(chain[-1].children[0])
            last = chain[-1].children[0]
            steps = " -> ".join(n.name for n in [*chain, last])
            yield Finding(FindingKind.SINGLE_CHILD, Severity.WARNING,
                          tuple(n.path_str for n in chain),
                          f"single-child chain {steps}: {len(chain)} routing call(s) that "
                          "decide nothing",
                          f"move {last.name!r} up to "
                          f"{(tree.node(chain[0].path[:-1]).path_str or '<root>')!r} and drop "
                          f"{', '.join(repr(n.name) for n in chain)}",
                          score=float(len(chain)))
    for top, nodes in too_deep.items():
        deepest = max(n.depth for n in nodes)
        yield Finding(FindingKind.DEEP_TREE, Severity.WARNING, ("/".join(top),),
                      f"{len(nodes)} leaves below here sit deeper than {thresholds.max_depth} "
                      f"levels (deepest at {deepest}): each level is one sequential routing call",
                      "merge single-purpose routers on the way down into their parents",
                      score=float(deepest))


def _starts_chain(tree: CapabilityTree, node: Node) -> bool:
    if node.depth == 0:
        return False  # a one-child root is still the catalog's entry point
    parent = tree.node(node.path[:-1])
    return not (len(parent.children) == 1 and parent.depth > 0)
