"""The paper's four synthetic workloads, one generator each.

- `scale_up` and `noisy_two_step` share the *services* catalog: a four-level taxonomy
  (group > sector > area > object) whose objects each carry four operations as leaves.
  For the same (N, seed) both suites get the identical catalog; only the queries differ.
- `semantic_overlap` and `clean_semantic` share the *household* leaves (eight money actions
  on 32 kinds of bill) and their queries; they differ only in how the leaves are organised:
  under four money departments whose descriptions share vocabulary, or under four life
  domains whose descriptions share none.

Tree shape (services, and household as far as its pool allows): every router has at most
4 children, the leaf level is one object's 4 operations, and the routers above the objects
follow `balanced_widths`, so depth = ceil(log4 N): 16 -> 2, 32 and 64 -> 3, 128 and 256 -> 4
(the paper's 128 tools took 4 routing calls), 512 -> 5.

The words themselves (taxonomies, operations, bills) live in `taxonomies.py` and `bills.py`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from stackroute.bench.workloads.bills import (
    DEPARTMENTS,
    LIFE_DOMAINS,
    MONEY_ACTIONS,
    Bill,
    BillCategory,
    LifeDomain,
    MoneyAction,
    money_param,
)
from stackroute.bench.workloads.catalogs import (
    JsonObject,
    LeafSpec,
    Param,
    PlacedLeaf,
    QueryRecord,
    RouterSpec,
    balanced_widths,
    build_parameters,
    build_tree,
    derive_rng,
    sample_args,
)
from stackroute.bench.workloads.taxonomies import (
    SERVICE_OPS,
    SERVICES,
    ServiceOp,
    Topic,
    service_params,
)
from stackroute.bench.workloads.word_banks import (
    CHATTER,
    MENTIONS,
    TWO_STEP_FORMS,
    as_sentence,
    join_words,
    out_of_scope_queries,
    plural,
    shared_words,
)

MAX_BRANCHING = 4
OPS_PER_OBJECT = 4
MAX_IN_SCOPE_QUERIES = 64
NUM_TWO_STEP_QUERIES = 32
OUT_OF_SCOPE_EVERY = 16  # one out-of-scope query per this many in-scope ones (at least one)


@dataclass(frozen=True)
class SuiteDraft:
    """What one generator makes; `generate.py` adds the flat twin and common metadata."""

    catalog: JsonObject
    queries: list[QueryRecord]
    metadata: JsonObject


# Taxonomy level (1 group, 2 sector, 3 area) of each router level between the root and the
# objects (level 4), by how many such levels the balanced shape has.
_ROUTER_LEVELS: dict[int, tuple[int, ...]] = {0: (), 1: (2,), 2: (2, 3), 3: (1, 2, 3)}


@dataclass(frozen=True)
class ServiceLeaf:
    """A generated services leaf with what its queries need."""

    path: str
    obj: Topic
    op: ServiceOp
    params: tuple[Param, ...]

    def clause(self, args: dict[str, Any], rng: random.Random) -> str:
        attr = self.obj.attribute
        slots: dict[str, Any] = {
            **args, "noun": self.obj.noun, "plural": plural(self.obj.noun),
            "attr_label": attr.name.replace("_", " ") if attr else "",
            "id": args.get(f"{self.obj.name}_id"), "attr": args.get(attr.name) if attr else None,
        }
        return rng.choice(self.op.clauses).format(**slots)


def _pick_objects(
    rng: random.Random, node: Topic, node_level: int, chain: tuple[int, ...],
    widths: tuple[int, ...], trail: tuple[Topic, ...],
) -> list[tuple[tuple[Topic, ...], Topic]]:
    """Walk the taxonomy along the balanced shape: `widths[0]` distinct children of `node`,
    each followed down at random to the taxonomy level `chain[0]`, and so on to objects."""
    picked: list[tuple[tuple[Topic, ...], Topic]] = []
    for child in rng.sample(node.children, widths[0]):
        unit, level = child, node_level + 1
        while level < chain[0]:
            unit, level = rng.choice(unit.children), level + 1
        if len(chain) == 1:
            picked.append((trail, unit))
        else:
            picked.extend(_pick_objects(rng, unit, level, chain[1:], widths[1:], (*trail, unit)))
    return picked


def services_catalog(num_leaves: int, seed: int) -> tuple[JsonObject, list[ServiceLeaf]]:
    """The services catalog for `num_leaves` (8..512, a power of two) and its leaves."""
    if num_leaves % OPS_PER_OBJECT:
        raise ValueError(f"num_leaves must be a multiple of {OPS_PER_OBJECT}, got {num_leaves}")
    rng = derive_rng("services", num_leaves, seed)
    widths = balanced_widths(num_leaves // OPS_PER_OBJECT, max_branching=MAX_BRANCHING)
    chain = (*_ROUTER_LEVELS[len(widths) - 1], 4)
    placed: list[PlacedLeaf] = []
    leaves: list[ServiceLeaf] = []
    for trail, obj in _pick_objects(rng, SERVICES, 0, chain, widths, ()):
        ops = [SERVICE_OPS[i] for i in sorted(rng.sample(range(len(SERVICE_OPS)),
                                                         OPS_PER_OBJECT))]
        obj_router = RouterSpec(obj.name, f"{plural(obj.noun).capitalize()}: "
                                f"{join_words([op.summary for op in ops], 'or')} them.")
        routers = (*(RouterSpec(t.name, t.description) for t in trail), obj_router)
        for op in ops:
            params, required = service_params(op, obj)
            attr_label = obj.attribute.name.replace("_", " ") if obj.attribute else ""
            name = f"{op.verb}_{plural(obj.name) if op.is_plural else obj.name}"
            leaf = LeafSpec(name=name,
                            description=op.description.format(noun=obj.noun,
                                                              plural=plural(obj.noun),
                                                              attr_label=attr_label),
                            parameters=build_parameters(params, required=required, rng=rng),
                            is_sensitive=op.is_sensitive)
            placed.append(PlacedLeaf(routers, leaf))
            path = "/".join([r.name for r in routers] + [name])
            leaves.append(ServiceLeaf(path, obj, op, tuple(params)))
    tops = list(dict.fromkeys(p.routers[0].name.replace("_", " ") for p in placed))
    root = RouterSpec("root", f"Customer and staff services: {join_words(tops)}.")
    return build_tree(root, placed), leaves


def _with_out_of_scope(
    items: list[tuple[str, list[str], list[dict[str, Any]], list[str]]], rng: random.Random,
    *, wrap: Callable[[str], str] = str, extra_tags: tuple[str, ...] = (),
) -> list[QueryRecord]:
    """Insert one out-of-scope query per OUT_OF_SCOPE_EVERY at random places; number them."""
    count = max(1, len(items) // OUT_OF_SCOPE_EVERY)
    for text in out_of_scope_queries(count, rng):
        items.insert(rng.randint(0, len(items)), (wrap(text), [], [], ["out-of-scope",
                                                                          *extra_tags]))
    return [QueryRecord(id=f"q{i:03d}", query=q, gold=gold, args=args, tags=tags)
            for i, (q, gold, args, tags) in enumerate(items, start=1)]


def scale_up(num_leaves: int, seed: int) -> SuiteDraft:
    """Clear single-leaf requests over the services catalog (the paper's scale benchmark)."""
    catalog, leaves = services_catalog(num_leaves, seed)
    rng = derive_rng("scale-up", num_leaves, seed)
    items: list[tuple[str, list[str], list[dict[str, Any]], list[str]]] = []
    for leaf in rng.sample(leaves, min(len(leaves), MAX_IN_SCOPE_QUERIES)):
        args = sample_args(leaf.params, rng)
        items.append((as_sentence(leaf.clause(args, rng), rng), [leaf.path], [args], ["clear"]))
    return SuiteDraft(catalog, _with_out_of_scope(items, rng), {"catalog_family": "services"})


# -- noisy two-step -------------------------------------------------------------------------

def _distractors(rng: random.Random, others: Sequence[Topic]) -> list[str]:
    """Two or three irrelevant sentences; one or two name another capability's object."""
    count = min(len(others), rng.randint(1, 2))  # tiny catalogs may have no other object
    mentions = [template.format(noun=o.noun, plural=plural(o.noun))
                for template, o in zip(rng.sample(MENTIONS, count),
                                       rng.sample(list(others), count), strict=True)]
    return [*mentions, rng.choice(CHATTER)]


def _scatter(parts: list[str], extra: list[str], rng: random.Random) -> str:
    for sentence in extra:
        parts.insert(rng.randint(0, len(parts)), sentence)
    return " ".join(parts)


def noisy_two_step(num_leaves: int, seed: int) -> SuiteDraft:
    """Two-leaf workflows in order, with chatter and other domains' words mixed in."""
    catalog, leaves = services_catalog(num_leaves, seed)
    rng = derive_rng("noisy-two-step", num_leaves, seed)
    objects = list({leaf.obj.name: leaf.obj for leaf in leaves}.values())
    items: list[tuple[str, list[str], list[dict[str, Any]], list[str]]] = []
    for _ in range(NUM_TWO_STEP_QUERIES):
        first = rng.choice(leaves)
        same_object = [x for x in leaves if x.obj is first.obj and x is not first]
        if rng.random() < 0.5:  # a workflow on one record: the second step reuses its id
            second = rng.choice(same_object)
        else:
            second = rng.choice([x for x in leaves if x.obj is not first.obj])
        args1, args2 = sample_args(first.params, rng), sample_args(second.params, rng)
        id_name = f"{first.obj.name}_id"
        if second.obj is first.obj and id_name in args1 and id_name in args2:
            args2[id_name] = args1[id_name]
        c1, c2 = first.clause(args1, rng), second.clause(args2, rng)
        form = rng.choice(TWO_STEP_FORMS)
        parts = [p.format(c1=c1, c2=c2, C1=c1[:1].upper() + c1[1:]) for p in form]
        others = [o for o in objects if o is not first.obj and o is not second.obj]
        text = _scatter(parts, _distractors(rng, others), rng)
        items.append((text, [first.path, second.path], [args1, args2], ["two-step", "noisy"]))

    def wrap(text: str) -> str:
        return _scatter([text], _distractors(rng, objects), rng)

    queries = _with_out_of_scope(items, rng, wrap=wrap, extra_tags=("noisy",))
    return SuiteDraft(catalog, queries, {"catalog_family": "services"})


# -- household bills: semantic overlap and its clean twin -----------------------------------


@dataclass(frozen=True)
class HouseholdLeaf:
    """One (action, bill) leaf and where each organisation puts it."""

    leaf: LeafSpec
    action: MoneyAction
    bill: Bill
    params: tuple[Param, ...]
    clean_routers: tuple[RouterSpec, ...]
    overlap_routers: tuple[RouterSpec, ...]

    def clause(self, args: dict[str, Any], rng: random.Random) -> str:
        return rng.choice(self.action.clauses).format(bill=self.bill.bill,
                                                      label=self.bill.label, **args)


# Bills per life domain and actions per bill, by catalog size; both trees come out balanced
# with branching <= 4 (see household_leaves).
HOUSEHOLD_SHAPES: dict[int, tuple[int, int]] = {16: (4, 1), 32: (2, 4), 64: (4, 4), 128: (8, 4)}


def household_leaves(num_leaves: int, seed: int) -> list[HouseholdLeaf]:
    """The leaves shared by semantic-overlap and clean-semantic, with both placements.

    Clean:   domain > leaves (16) | domain > bill > leaves (32, 64) |
             domain > category > bill > leaves (128).
    Overlap: department > leaves (16) | department > domain > leaves (32, 64) |
             department > domain > category > leaves (128).
    Each bill carries one action of each department (16: each domain's four bills carry one
    department each), so every department holds the same number of leaves.
    """
    if num_leaves not in HOUSEHOLD_SHAPES:
        raise ValueError(f"num_leaves must be one of {sorted(HOUSEHOLD_SHAPES)}, got {num_leaves}")
    bills_per_domain, actions_per_bill = HOUSEHOLD_SHAPES[num_leaves]
    rng = derive_rng("household", num_leaves, seed)
    by_department = {d.name: [a for a in MONEY_ACTIONS if a.departments[0] == d.name]
                     for d in DEPARTMENTS}
    departments = [d.name for d in DEPARTMENTS]
    leaves: list[HouseholdLeaf] = []
    for domain in LIFE_DOMAINS:
        per_category = bills_per_domain // len(domain.categories)
        picked = [(c, b) for c in domain.categories
                  for b in sorted(rng.sample(c.bills, per_category), key=c.bills.index)]
        order = rng.sample(departments, len(departments))  # 16: one department per bill
        for i, (category, bill) in enumerate(picked):
            chosen = departments if actions_per_bill == len(departments) else [order[i]]
            actions = [rng.choice(by_department[d]) for d in chosen]
            for action in actions:
                leaves.append(_household_leaf(num_leaves, domain, category, bill, action,
                                              actions, rng))
    return leaves


def _household_leaf(
    num_leaves: int, domain: LifeDomain, category: BillCategory, bill: Bill,
    action: MoneyAction, siblings: Sequence[MoneyAction], rng: random.Random,
) -> HouseholdLeaf:
    params = [money_param(p, bill) for p in action.params]
    leaf = LeafSpec(name=action.name.format(s=bill.name),
                    description=action.description.format(bill=bill.bill, label=bill.label),
                    parameters=build_parameters(params, required=action.params, rng=rng),
                    is_sensitive=action.is_sensitive)
    domain_r = RouterSpec(domain.name, domain.description)
    category_r = RouterSpec(category.name, category.description)
    bill_r = RouterSpec(bill.name, f"Your {bill.bill}: "
                        f"{join_words([a.summary for a in siblings], 'or')}.")
    department = next(d for d in DEPARTMENTS if d.name == action.departments[0])
    clean: tuple[RouterSpec, ...]
    overlap: tuple[RouterSpec, ...]
    if num_leaves == 16:
        clean, overlap = (domain_r,), (department,)
    elif num_leaves == 128:
        clean, overlap = (domain_r, category_r, bill_r), (department, domain_r, category_r)
    else:
        clean, overlap = (domain_r, bill_r), (department, domain_r)
    return HouseholdLeaf(leaf, action, bill, tuple(params), clean, overlap)


def _household_suite(num_leaves: int, seed: int, *, is_overlap: bool) -> SuiteDraft:
    leaves = household_leaves(num_leaves, seed)
    root = RouterSpec("root", "Household bills and the money that pays for them.")
    if is_overlap:
        rank = {d.name: i for i, d in enumerate(DEPARTMENTS)}
        ordered = sorted(leaves, key=lambda x: rank[x.action.departments[0]])  # stable
        placed = [PlacedLeaf(x.overlap_routers, x.leaf) for x in ordered]
    else:
        placed = [PlacedLeaf(x.clean_routers, x.leaf) for x in leaves]
    catalog = build_tree(root, placed)
    paths = {p.leaf.name: "/".join([r.name for r in p.routers] + [p.leaf.name])
             for p in placed}
    # Queries come from their own stream, shared by both organisations.
    rng = derive_rng("household-queries", num_leaves, seed)
    items: list[tuple[str, list[str], list[dict[str, Any]], list[str]]] = []
    for x in rng.sample(leaves, min(len(leaves), MAX_IN_SCOPE_QUERIES)):
        args = sample_args(x.params, rng)
        tags = ["boundary", "overlap"] if x.action.is_boundary else ["clear"]
        items.append((as_sentence(x.clause(args, rng), rng), [paths[x.leaf.name]], [args],
                      tags))
    tops = DEPARTMENTS if is_overlap else [RouterSpec(d.name, d.description)
                                           for d in LIFE_DOMAINS]
    metadata: JsonObject = {
        "catalog_family": "household",
        "organisation": "overlapping departments" if is_overlap else "exclusive life domains",
        "num_boundary_leaves": sum(x.action.is_boundary for x in leaves),
        "top_level_shared_words": shared_words([t.description for t in tops]),
    }
    return SuiteDraft(catalog, _with_out_of_scope(items, rng), metadata)


def semantic_overlap(num_leaves: int, seed: int) -> SuiteDraft:
    """Top-level departments share vocabulary; each request still names one leaf."""
    return _household_suite(num_leaves, seed, is_overlap=True)


def clean_semantic(num_leaves: int, seed: int) -> SuiteDraft:
    """The same leaves and requests as `semantic_overlap`, under mutually exclusive domains."""
    return _household_suite(num_leaves, seed, is_overlap=False)
