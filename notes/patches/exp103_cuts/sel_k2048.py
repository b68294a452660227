import json
import configs as C
d=json.load(open("scratch/changed.json"))
out=[]
for k,v in d.items():
    v=[tuple(map(tuple,s)) for s in v]
    for K in (2048,4096):
        vv=[s for s in v if s[0][2]==K and "+" in k.split("->")[1]]
        vv.sort(key=C.two_forms_wide_share)
        n=5 if K==2048 else 2
        if not vv: continue
        for i in range(n):
            s=vv[int((i+0.5)*len(vv)/n)]
            out.append(s); print(k[:28],K,len(s),s[0][1],"share %.2f"%C.two_forms_wide_share(s), "kb",C.two_forms_k_blocks(s))
open("scratch/sel_k2048.txt","w").write(";".join("/".join(f"{m}x{n}x{k}" for m,n,k in s) for s in out))
print(len(out))
