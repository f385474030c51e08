"""Token cost of shortlisting the root (menu-first): the root turn with a shortlist vs without,
over Seal-Tools dev single-tool requests (tokenizer and evidence only, no model calls)."""
import json, statistics, sys
from pathlib import Path
from transformers import AutoTokenizer
from stackroute.runtime.catalog import load_catalog
from stackroute.runtime.menu import frame_menu
from stackroute.runtime.prompt import PromptLayout
from stackroute.server.engines.model_store import resolve_model
from stackroute.server.routing.router import evidence_for_tree
from stackroute.server.routing.calibration import read_calibration, CALIBRATION_DIR
from stackroute.server.routing.shortlist import ShortlistOptions, EvidenceShortlister
from stackroute.server.tools.evaluate import read_queries
seal = Path('/work/shared/data/seal-tools')
tree = load_catalog(seal / 'seal-tools.catalog.json')
tok = AutoTokenizer.from_pretrained(resolve_model(None), local_files_only=True)
ev = evidence_for_tree(tree)
prior = read_calibration(CALIBRATION_DIR / 'SmolLM2-135M-Instruct.Q4_1.json').prior
layout = PromptLayout(tree)
out = {}
for margin in (0.05, 0.08):
    sl = EvidenceShortlister(lambda t, c: ev.for_request(t), ShortlistOptions(margin=margin, min_depth=0), prior)
    qs = [q for q in read_queries(seal / 'dev.queries.jsonl') if 'single-tool' in q.tags]
    extra, used = [], 0
    for q in qs:
        menu = frame_menu(path='', child_names=tree.root.child_names, depth=0, tried=(), has_output=False, shortlist=None)
        s = sl.shortlist(q.query, (), tree.root, menu)
        plain = len(tok.encode(layout.menu_turn(tree.root, request=q.query).content))
        if s is None:
            continue
        used += 1
        smenu = frame_menu(path='', child_names=tree.root.child_names, depth=0, tried=(), has_output=False, shortlist=s.children)
        short = len(tok.encode(layout.shortlist_turn(tree.root, s, smenu, request=q.query).content))
        extra.append(short - plain)
    out[str(margin)] = {"queries": len(qs), "root_shortlisted": used,
                        "extra_root_turn_tokens_mean": statistics.fmean(extra),
                        "extra_root_turn_tokens_max": max(extra)}
print(json.dumps(out, indent=1))
Path(sys.argv[1]).write_text(json.dumps(out, indent=1) + "\n")
