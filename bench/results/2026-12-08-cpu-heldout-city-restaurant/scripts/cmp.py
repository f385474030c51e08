"""argv: run folders (one eval JSON per catalog, runall.sh). Compare eval runs of the same catalogs: in-scope right leaf, exact call, out of scope uncalled."""
import json, sys, os, glob
dirs = sys.argv[1:]
names = sorted({os.path.basename(f)[:-5] for d in dirs for f in glob.glob(f'{d}/*.json')})
tot = {d: [0,0,0,0,0] for d in dirs}
print('catalog', *[os.path.basename(d) for d in dirs])
for n in names:
    cells = []
    for d in dirs:
        f = f'{d}/{n}.json'
        if not os.path.exists(f) or os.path.getsize(f) == 0: cells.append('-'); continue
        r = json.load(open(f))['results']
        ins = [q for q in r if q['gold']]; oos = [q for q in r if not q['gold']]
        leaf = sum(q['success'] for q in ins); ex = sum(q['args_success'] for q in ins)
        un = sum(not q['called'] for q in oos)
        t = tot[d]; t[0]+=len(ins); t[1]+=leaf; t[2]+=ex; t[3]+=len(oos); t[4]+=un
        cells.append(f'{leaf}/{ex}/{len(ins)} oos {un}/{len(oos)}')
    print(n, *cells)
for d in dirs: print(os.path.basename(d), 'in-scope', tot[d][0], 'leaf', tot[d][1], 'exact', tot[d][2], 'oos uncalled', tot[d][4], 'of', tot[d][3])
