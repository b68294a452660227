import random, collections
import configs as C
random.seed(2026112503)
NS=[2048,3072,4096,5120,7168,8192,14336]; KS=[2048,4096,7168]
def pick(sh, off):
    if off:
        keep=C.group_wave_plan_applies; C.group_wave_plan_applies=lambda s: False
        try: return C.select_config("group","sm_90a",sh)
        finally: C.group_wave_plan_applies=keep
    return C.select_config("group","sm_90a",sh)
changed=collections.defaultdict(list); n=0
for i in range(3000):
    g=random.choice([4,6,8,12,16]); N=random.choice(NS); K=random.choice(KS)
    lo=random.choice([16,32,64,128,200]); hi=lo+random.choice([64,128,200,300])
    sh=tuple((random.randint(lo,hi),N,K) for _ in range(g))
    a,b=pick(sh,True),pick(sh,False)
    if a!=b:
        n+=1; changed[(a.short(),b.short())].append(sh)
print(n)
for k,v in changed.items(): print(k,len(v))
import json; json.dump({f"{a} -> {b}":v for (a,b),v in changed.items()}, open("scratch/changed.json","w"))
