"""Stub menus' arguments equal to the gold (after coercion) per catalog: argv: two stub tags;
run from this folder with the product on PYTHONPATH."""
import glob, json, sys
from stackroute.runtime.catalog import load_catalog
from stackroute.server.tools.evaluate import arguments_equal
B = '..'
tot = {t: 0 for t in sys.argv[1:]}
for f in sorted(glob.glob(f'stub/{sys.argv[1]}-*.json')):
    name = f.split(f'{sys.argv[1]}-', 1)[1][:-5]
    if name in ('dev', 'test'):
        continue
    found = sorted(glob.glob(f'{B}/*/heldout-{name}/{name}.queries.jsonl') + glob.glob(f'{B}/*/{name}.queries.jsonl')
                   + glob.glob(f'{B}/*/heldout/{name}*.queries.jsonl'))
    qf = found[0]
    tree = load_catalog(qf.replace('.queries.jsonl', '.catalog.json'))
    gold = {q['id']: q for q in map(json.loads, filter(str.strip, open(qf))) if q.get('args')}
    row = []
    for t in sys.argv[1:]:
        d = json.load(open(f'stub/{t}-{name}.json'))
        n = sum(arguments_equal(v['arguments'] or {}, gold[i]['args'][0], tree.get(gold[i]['gold'][0]).parameters)
                for i, v in d.items() if i in gold)
        tot[t] += n; row.append(n)
    print(name, len(gold), *row)
print('total', *tot.values())
