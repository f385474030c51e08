import pickle, numpy as np, sys  # argv: the fuse2.py cache
data = pickle.load(open(sys.argv[1],'rb'))
def groups():
    dev = [d for d in data if d[0]=='dev.queries.jsonl']; test=[d for d in data if d[0]=='test.queries.jsonl']
    pair = [d for d in data if d[0] in ('hotel.catalog.json','lab.catalog.json')]
    cats = [d for d in data if d not in dev+test+pair]
    return {'sealdev':dev,'cats15':cats,'pair':pair,'sealtest':test}
G = groups()
def top1(f, g):
    return sum(int(np.argmax(f(d,l))==gold) for _,rows in G[g] for gold,d,l,_ in rows), sum(len(r) for _,r in G[g])
# disagreement stats
for g in G:
    n=agree=dr=lr=neither=0
    for _,rows in G[g]:
        for gold,d,l,_ in rows:
            a,b=np.argmax(d),np.argmax(l); n+=1
            if a==b: agree+=1; continue
            if a==gold: dr+=1
            elif b==gold: lr+=1
            else: neither+=1
    print(g,n,'agree',agree,'dense-right',dr,'lex-right',lr,'neither',neither)
print()
for name,f in {'dense':lambda d,l:d,'lex':lambda d,l:l,'fused.5':lambda d,l:.5*d+.5*l}.items():
    print(name, {g: top1(f,g) for g in G})
