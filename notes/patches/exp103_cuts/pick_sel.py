import json, random
import configs as C
d=json.load(open("scratch/changed.json"))
random.seed(7)
sel=[]
for k,v in d.items():
    v=[tuple(map(tuple,s)) for s in v]
    # stratify by wide share
    v.sort(key=C.two_forms_wide_share if "+" in k.split("->")[1] else (lambda s: sum(m for m,_,_ in s)))
    n=5 if len(v)>100 else 2
    idx=[int((i+0.5)*len(v)/n) for i in range(n)]
    for i in idx:
        s=v[i]; sel.append(s)
        a16=sum(C.ceil_div(m,128)*128 for m,_,_ in s)*s[0][2]*2/2**20
        print(k[:60], len(s), s[0][1], s[0][2], [m for m,_,_ in s], "share %.2f a16 %.1fMB"%(C.two_forms_wide_share(s),a16))
spec=";".join("/".join(f"{m}x{n}x{k}" for m,n,k in s) for s in sel)
open("scratch/sel_spec.txt","w").write(spec)
