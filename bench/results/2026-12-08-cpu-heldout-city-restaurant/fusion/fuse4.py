import pickle, numpy as np
import os; exec(open(os.path.join(os.path.dirname(__file__), 'fuse3.py')).read().split('# disagreement')[0])  # argv: the fuse2.py cache
rows_out=[]
for g in G:
    for _,rows in G[g]:
        for gold,d,l,qid in rows:
            a,b=int(np.argmax(d)),int(np.argmax(l))
            if a==b: continue
            f=.5*d+.5*l; c=int(np.argmax(f))
            who = 'D' if a==gold else ('L' if b==gold else '-')
            dg = d[a]-d[b]; lg = l[b]-l[a]
            rows_out.append((g,qid,who,'F=D' if c==a else ('F=L' if c==b else 'F=o'), round(float(dg),3), round(float(lg),3), round(float(l[b]),3), round(float(d[a]),3)))
for r in sorted(rows_out, key=lambda r:(r[2],r[3])): print(*r)
