import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
for k in a:
    x = a[k]["arguments"] if isinstance(a[k], dict) and "arguments" in a[k] else a[k]
    y = b[k]["arguments"] if isinstance(b[k], dict) and "arguments" in b[k] else b[k]
    if x != y:
        print(k, {f: (x.get(f), y.get(f)) for f in set(x) | set(y) if x.get(f) != y.get(f)})
