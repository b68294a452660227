import json, statistics, math, sys
sys.path.insert(0, '.')
import nvfp4gemm  # noqa
import configs
from nvfp4gemm import scheduler
rows = json.load(open('docs/exp140_tiles_h100_s42.json'))['rows']
KB = configs.FORM_KB_US
SMS = 132

def busiest(shape, tile, sk=True):
    tm, tn = tile
    ms, ns, ks = zip(*shape)
    total, kb = scheduler.device_totals(ms, ns, ks, tm, tn, configs.K_BLOCK)
    if kb:
        waves, rest = divmod(total, SMS)
        whole = (waves + (rest > 0)) * kb
        if not sk:
            return whole
        dp = scheduler.device_plan(total, kb, 0, SMS)[0]
        if dp == total:
            return whole
        # the plan's own cost model
        tail = rest * kb
        short = tail // SMS
        if dp == waves * SMS:
            return waves * kb + -(-tail // SMS) + scheduler.DEVICE_SK_SEGMENT_KB * (-(-kb // max(short, 1)))
        return (waves - 1) * kb + -(-((SMS + rest) * kb) // SMS) + scheduler.DEVICE_SK_SEGMENT_KB
    # mixed K: tiles in group order, CTA c takes c, c + SMS, ...
    kbs = []
    for m, n, k in shape:
        kbs += [k // configs.K_BLOCK] * (-(-m // tn) * (n // tm))
    return max(sum(kbs[c::SMS]) for c in range(min(SMS, len(kbs))))

def model(shape, tile, w=None, c=0.0):
    w = w or {}
    return w.get(tile, KB[tile]) * busiest(shape, tile) + c

def evaluate(pick):
    rs = []
    for r in rows:
        shape = [tuple(s) for s in r['shape']]
        t = pick(shape)
        key = f"{t[0]}x{t[1]}"
        rs.append(r['us'][key] / min(r['us'].values()))
    return statistics.geometric_mean(rs), max(rs), sum(x == 1 for x in rs)

def rule_pick(shape):
    return configs.device_schedule_tile(shape)

def model_pick(w=None, c=0.0):
    def pick(shape):
        cands = [t for t in [(256, 128), (128, 128), (256, 64)] if all(n % t[0] == 0 for _m, n, _k in shape)]
        return min(cands, key=lambda t: model(shape, t, w, c))
    return pick

print('rule', evaluate(rule_pick))
print('model FORM_KB_US', evaluate(model_pick()))
# predicted vs measured per tile
for r in rows[:40]:
    shape = [tuple(s) for s in r['shape']]
    pred = {f"{t[0]}x{t[1]}": model(shape, t) for t in [(256, 128), (128, 128), (256, 64)]}
    print(len(shape), shape[0][1], shape[0][2], max(m for m, _, _ in shape), ' '.join(f"{k} {r['us'][k]:.0f}/{pred[k]:.0f}" for k in r['us']))

import numpy as np
T = [(256, 128), (128, 128), (256, 64)]
def fit(sub):
    w, c = {}, {}
    for t in T:
        key = f"{t[0]}x{t[1]}"
        X = np.array([[busiest([tuple(s) for s in r['shape']], t), 1.0] for r in sub if key in r['us']])
        y = np.array([r['us'][key] for r in sub if key in r['us']])
        (a, b), *_ = np.linalg.lstsq(X, y, rcond=None)
        w[t], c[t] = a, b
    return w, c
def pick_wc(w, c):
    def pick(shape):
        cands = [t for t in T if all(n % t[0] == 0 for _m, n, _k in shape)]
        return min(cands, key=lambda t: w[t] * busiest(shape, t) + c[t])
    return pick
w, c = fit(rows)
print('fit all', {t: (round(w[t], 3), round(c[t], 1)) for t in T}, evaluate(pick_wc(w, c)))
A, B = rows[::2], rows[1::2]
for name, fs, ev in (('fit even, check odd', A, B), ('fit odd, check even', B, A)):
    w, c = fit(fs)
    keep = rows[:]
    rows[:] = ev
    print(name, {t: (round(w[t], 3), round(c[t], 1)) for t in T}, 'fit:', evaluate(pick_wc(w, c)))
    print('   rule on the same', evaluate(rule_pick), 'FORM_KB_US', evaluate(model_pick()))
    rows[:] = keep
print('misses of the FORM_KB_US model:')
p = model_pick()
for r in rows:
    shape = [tuple(s) for s in r['shape']]
    t = p(shape); key = f"{t[0]}x{t[1]}"
    if r['us'][key] > min(r['us'].values()):
        print(len(shape), shape[0][1], shape[0][2], [m for m, _, _ in shape], r['us'], key, {f"{t[0]}x{t[1]}": round(model(shape, t), 1) for t in T}, {f"{t[0]}x{t[1]}": busiest(shape, t) for t in T})
