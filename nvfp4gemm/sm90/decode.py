"""In-kernel NVFP4 decode for sm_90a: packed e2m1 + e4m3 scale -> fp16, exact.

sm_90a has no `cvt.rn.f16x2.e2m1x2` (ptxas rejects it), so the decode goes through e4m3:

* e2m1 code s e1 e0 m0 -> e4m3 byte (s << 7) | (e1 e0 m0 << 2), which is the e2m1 value
  times 2^-6 for all 16 codes (e2m1's subnormal 0.5 lands on e4m3's subnormal 2^-7); then
  `cvt.rn.f16x2.e4m3x2` (sm_89+, accepted by ptxas for sm_90a, exact) per pair.
* The e4m3 scale is converted exactly with the same cvt, and one `mul.rn.f16x2` (no .ftz)
  applies it: the product has at most 4 significant bits and lies within fp16's range, so
  it is exact.

Both wgmma operands carry the 2^-6 factor, so the fp32 accumulator holds the true value
times 2^-12; the epilogue multiplies by ACC_RESCALE = 2^12 (exact in fp32).

K order (the A operand is decoded into wgmma registers; the B tiles are decoded into shared
memory in the matching order).  Thread c of the m64k16 A fragment owns positions {2c, 2c+1,
2c+8, 2c+9} of each k16 step.  Every code carries its own scale, so any permutation inside
a 64-code sub-block leaves the dot products unchanged; two are used:
* group-major (`decode_a_frag`, `decode_task` / `decode_task16`): k16 step g is scale group
  g and thread c's positions hold codes 4c..4c+3 of it -- one 16-bit halfword per row, so a
  B decode task may be a single group (the quarter tasks of tile N 96 and the swap tiles);
* pair-major (`decode_word`, `decode_task(pair_major=True)`): in each half h of the
  sub-block (groups 2h, 2h+1 = 16 bytes of a row) thread c owns 32-bit word c, whose codes
  feed steps 2h and 2h+1 -- one load and one scale per row and half, no halfword select;
  a B task must then be a whole 32-code half (kernels whose B tasks all are use it:
  `Sm90Common.pair_major`; -1.6..-2.2% dual, -0.5..-2% grouped, H200, notes/sm90.md exp. 56).

Shared-memory helpers take 32-bit shared-window addresses (`ptr.toint()` of an smem ptr).
(The bit-placement decode, fp16 bits (s << 15) | (e1 e0 m0 << 9) times 2^-14, was an
experiment; it is in git history, commit fa0454c.)
"""

import cutlass
from cutlass import Int32
from cutlass.cutlass_dsl import T, dsl_user_op
from cutlass._mlir.dialects import llvm

# Decoded operands carry 2^-6 each; the accumulator is multiplied back by the square.
ACC_RESCALE = float(2**12)


def _asm(ret_type, operands, text, constraints, side_effects, loc=None, ip=None):
    return llvm.inline_asm(
        ret_type,
        operands,
        text,
        constraints,
        has_side_effects=side_effects,
        is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT,
        loc=loc,
        ip=ip,
    )


def _asm_ints(n_out: int, inputs, text: str, loc, ip) -> tuple:
    """Pure inline PTX `text` with n_out 32-bit outputs ($0 ..) and 32-bit inputs (numbered after
    them); returns the outputs as Int32."""
    res = _asm(llvm.StructType.get_literal([T.i32()] * n_out), [Int32(x).ir_value(loc=loc, ip=ip) for x in inputs],
               text, ",".join(["=r"] * n_out + ["r"] * len(inputs)), False, loc=loc, ip=ip)
    return tuple(Int32(llvm.extractvalue(T.i32(), res, [i], loc=loc, ip=ip)) for i in range(n_out))


def _ee_eo_ptx(w: str, ee: str, eo: str) -> str:
    """e4m3 bytes of the even codes (ee) and odd codes (eo) of the 8 codes in `w`:
    byte k of ee/eo is the e4m3 form of code 2k / 2k+1 (module docstring)."""
    return "\n".join([
        f"shr.b32 t, {w}, 2;",
        "and.b32 t, t, 0x1C1C1C1C;",
        f"lop3.b32 {eo}, {w}, t, 0x80808080, 0xEC;",
        f"shl.b32 t, {w}, 2;",
        "and.b32 t, t, 0x1C1C1C1C;",
        f"shl.b32 u, {w}, 4;",
        f"lop3.b32 {ee}, t, u, 0x80808080, 0xF8;",
    ])


def _f16x2_pair_ptx(e: str, d_lo: str, s_lo: str, d_hi: str, s_hi: str) -> str:
    """The two e4m3 byte pairs of `e` (low and high halfword) as fp16x2, times the fp16x2
    scales s_lo / s_hi, into d_lo / d_hi (needs .b16 q0, q1 and .b32 v declared)."""
    return "\n".join([
        f"mov.b32 {{q0, q1}}, {e};",
        "cvt.rn.f16x2.e4m3x2 v, q0;",
        f"mul.rn.f16x2 {d_lo}, v, {s_lo};",
        "cvt.rn.f16x2.e4m3x2 v, q1;",
        f"mul.rn.f16x2 {d_hi}, v, {s_hi};",
    ])


def _word_f16x2_ptx(w: str, outs: tuple, scales: tuple, pre: str = "") -> str:
    """One asm block decoding the 8 codes of word `w` (after the optional `pre` lines, which
    may define the .b32 register x): outs = (even pair of the low half, odd pair of the low
    half, even pair of the high half, odd pair of the high half) as fp16x2, the low half's
    pairs times scales[0], the high half's times scales[1]."""
    return "\n".join([
        "{",
        ".reg .b32 x, t, u, ee, eo, v;",
        ".reg .b16 q0, q1;",
        pre,
        _ee_eo_ptx(w, "ee", "eo"),
        _f16x2_pair_ptx("ee", outs[0], scales[0], outs[2], scales[1]),
        _f16x2_pair_ptx("eo", outs[1], scales[0], outs[3], scales[1]),
        "}",
    ])


def _decode_b_ptx(n_words: int, tasks: int = 1, pair_major: bool = False) -> str:
    """PTX body of `decode_task` (4 words, 32 codes) / `decode_task16` (2 words, 16 codes):
    load the packed words from [$0], the scales of their n_words / 2 groups from
    ($1 >> $2), decode in the register-A K order and store n_words 16-byte fp16 chunks at
    [$3 ^ (16 * c)].  With `tasks` > 1 (`decode_task_x2`), task i takes operands $4i..$4i+3
    and every task's packed words are loaded first, so one task's shared-memory latency
    overlaps another's decode (ptxas cannot hoist a load above an earlier task's stores:
    they may alias).

    K order inside each 16-code group g (words w0 = codes 0..7, w1 = codes 8..15): fp16
    positions 0..7 hold codes (0,2),(4,6),(8,10),(12,14) and positions 8..15 hold
    (1,3),(5,7),(9,11),(13,15) -- the even / odd e4m3 bytes of w0, w1 converted low half
    then high half; this pairs with the register A operand of `decode_a_frag`.

    `pair_major` (32-code tasks only): chunk c = (k16 step c // 2 of the task, even / odd
    codes) takes one fp16 pair from each of the 4 words -- word i's codes (4 t, 4 t + 2)
    (even) or (4 t + 1, 4 t + 3) (odd), t = c // 2, times the scale of group i // 2 -- which
    pairs with A-fragment thread i, whose `decode_word` of the row's word i gives the same
    pairs (`Sm90Common._decode_a_pairs`)."""
    n, g = n_words, n_words // 2
    assert not pair_major or n == 4, "pair-major order needs 32-code tasks"

    def regs(prefix, idx):
        return [f"{prefix}{i}" for i in idx]

    def words(k):
        return [f"w{k}_{i}" for i in range(n)]

    def body(k):
        src, sw, sh, dst = (f"${4 * k + i}" for i in range(4))
        w = words(k)
        lines = [_ee_eo_ptx(w[wi], f"e{wi}", f"d{wi}") for wi in range(n)]
        # (kind, word, half of the e4m3 bytes, scale group) of output register 0, 1, ...;
        # output 4 c + v is word v of 16-byte chunk c
        if pair_major:
            srcs = [("d" if c % 2 else "e", wi, c // 2, wi // 2) for c in range(4) for wi in range(4)]
        else:  # even codes -> chunk 2*grp, odd -> chunk 2*grp+1
            srcs = [(kind, wi, half, grp) for grp in range(g) for kind in ("e", "d")
                    for wi in (2 * grp, 2 * grp + 1) for half in (0, 1)]
        for outs, (kind, wi, half, grp) in enumerate(srcs):
            lines.append(f"mov.b32 {{q0, q1}}, {kind}{wi};")
            lines.append(f"cvt.rn.f16x2.e4m3x2 t, {'q0' if half == 0 else 'q1'};")
            lines.append(f"mul.rn.f16x2 o{outs}, t, s{grp};")
        b32 = (["t", "u"] + regs("s", range(g)) + regs("sb", range(g)) + regs("a", range(1, n))
               + regs("e", range(n)) + regs("d", range(n)))
        return [
            "{",
            f".reg .b32 {', '.join(b32)};",
            f".reg .b32 o<{4 * n}>;",
            f".reg .b16 {', '.join(regs('h', range(4)) + ['q0', 'q1'])};",
            # scales of these groups: bytes 0 .. g-1 of (scale_word >> scale_shift), both
            # converted by one cvt, then each half broadcast to (s, s) (ptxas may fold the
            # broadcast into the multiplies' operand swizzle)
            f"shr.b32 t, {sw}, {sh};",
            "mov.b32 {h0, h1}, t;",
            "cvt.rn.f16x2.e4m3x2 sb0, h0;",
            "mov.b32 {h2, h3}, sb0;",
            *[f"mov.b32 s{k2}, {{h{2 + k2}, h{2 + k2}}};" for k2 in range(g)],
            "\n".join(lines),
            *[f"xor.b32 a{c}, {dst}, {16 * c};" for c in range(1, n)],
            *[f"st.shared.v4.b32 [{dst if c == 0 else f'a{c}'}], "
              f"{{{', '.join(f'o{4 * c + v}' for v in range(4))}}};" for c in range(n)],
            "}",
        ]

    return "\n".join([
        "{",
        f".reg .b32 {', '.join(w for k in range(tasks) for w in words(k))};",
        *[f"ld.shared.v{n}.b32 {{{', '.join(words(k))}}}, [${4 * k}];" for k in range(tasks)],
        *[line for k in range(tasks) for line in body(k)],
        "}",
    ])


def _decode_b(n_words, args, loc, ip, tasks=1, pair_major=False):
    _asm(None, [Int32(x).ir_value(loc=loc, ip=ip) for x in args],
         _decode_b_ptx(n_words, tasks, pair_major), ",".join(["r"] * (4 * tasks)), True, loc=loc, ip=ip)


@dsl_user_op
def decode_task(src_addr: Int32, scale_word: Int32, scale_shift: Int32, dst_addr: Int32,
                pair_major: bool = False, *, loc=None, ip=None) -> None:
    """Decode 32 consecutive e2m1 codes of a B row (16 bytes at shared `src_addr`) into four
    16-byte fp16 chunks at shared `dst_addr ^ (16 * q)`, q = 0..3 (the 128B-swizzle row of
    the decoded tile: the caller passes the address of chunk q = 0 already swizzled), in
    the K order of `_decode_b_ptx`.  `scale_word` holds 4 e4m3 scales (one per 16 codes of
    a 64-code row segment); `scale_shift` (0 or 16) selects the two that cover these codes.
    `pair_major`: the K order of `_decode_b_ptx(pair_major=True)`."""
    _decode_b(4, (src_addr, scale_word, scale_shift, dst_addr), loc, ip, pair_major=pair_major)


@dsl_user_op
def decode_task_x2(src0: Int32, scale_word0: Int32, scale_shift0: Int32, dst0: Int32,
                   src1: Int32, scale_word1: Int32, scale_shift1: Int32, dst1: Int32,
                   pair_major: bool = False, *, loc=None, ip=None) -> None:
    """Two `decode_task`s in one block, both loads first (`_decode_b_ptx`)."""
    _decode_b(4, (src0, scale_word0, scale_shift0, dst0, src1, scale_word1, scale_shift1, dst1),
              loc, ip, tasks=2, pair_major=pair_major)


@dsl_user_op
def decode_task16(src_addr: Int32, scale_word: Int32, scale_shift: Int32, dst_addr: Int32,
                  *, loc=None, ip=None) -> None:
    """One 16-code scale group of a B row (8 bytes at shared `src_addr`) -> two 16-byte
    fp16 chunks at `dst_addr` (even codes) and `dst_addr ^ 16` (odd codes), same K order;
    the scale is byte `scale_shift / 8` of `scale_word`."""
    _decode_b(2, (src_addr, scale_word, scale_shift, dst_addr), loc, ip)


def scale_quad_ptx() -> str:
    """PTX of `scale_quad`: outputs $0..$3 = (s_g, s_g) for the 4 e4m3 bytes g of input $4."""
    return "\n".join([
        "{",
        ".reg .b32 v0, v1;",
        ".reg .b16 q0, q1, h0, h1, h2, h3;",
        "mov.b32 {q0, q1}, $4;",
        "cvt.rn.f16x2.e4m3x2 v0, q0;",
        "cvt.rn.f16x2.e4m3x2 v1, q1;",
        "mov.b32 {h0, h1}, v0;",
        "mov.b32 {h2, h3}, v1;",
        "mov.b32 $0, {h0, h0};",
        "mov.b32 $1, {h1, h1};",
        "mov.b32 $2, {h2, h2};",
        "mov.b32 $3, {h3, h3};",
        "}",
    ])


@dsl_user_op
def scale_quad(scale_word: Int32, *, loc=None, ip=None):
    """The 4 e4m3 scales of `scale_word` as fp16x2 pairs (s, s): two conversions for four (one
    byte select + one conversion per scale before: -1.4..-5.1% on the leaderboard shapes
    together with the same change in `_decode_b_ptx`, notes/sm90.md exp. 50)."""
    return _asm_ints(4, (scale_word,), scale_quad_ptx(), loc, ip)


def scale_pair_ptx() -> str:
    """PTX of `scale_pair`: outputs $0 = (s_a, s_a), $1 = (s_b, s_b) where a, b are the bytes of
    the scale word $2 named by selector nibbles 0 and 1 of $3."""
    return "\n".join([
        "{",
        ".reg .b32 t, v;",
        ".reg .b16 q0, q1, h0, h1;",
        "prmt.b32 t, $2, 0, $3;",
        "mov.b32 {q0, q1}, t;",
        "cvt.rn.f16x2.e4m3x2 v, q0;",
        "mov.b32 {h0, h1}, v;",
        "mov.b32 $0, {h0, h0};",
        "mov.b32 $1, {h1, h1};",
        "}",
    ])


@dsl_user_op
def scale_pair(scale_word: Int32, sel: Int32, *, loc=None, ip=None):
    """Two of the 4 e4m3 scales of `scale_word` (bytes picked by `sel`'s nibbles 0 and 1) as
    fp16x2 pairs (s, s): one byte gather and one conversion (pair-major A decode)."""
    return _asm_ints(2, (scale_word, sel), scale_pair_ptx(), loc, ip)


@dsl_user_op
def decode_a_frag(w_r0: Int32, w_r1: Int32, sel: Int32, s_r0: Int32, s_r1: Int32,
                  *, loc=None, ip=None):
    """wgmma A-fragment registers (R0..R3) of one k16 group for rows r0 and r1 = r0 + 8:
    `sel` picks this thread's 16-bit halfword out of the words `w_r0`, `w_r1` (0x5410 or
    0x7632); R0 = (r0, pos 2c..2c+1), R1 = (r1, same), R2 = (r0, pos 2c+8..2c+9),
    R3 = (r1, same), in the K order of `decode_task`; s_r0 / s_r1 are the rows'
    scales as fp16x2."""
    # x = this thread's halfword of r0 (low) and of r1 (high): (even, odd) e4m3 pairs of
    # each half go to (R0, R2) with r0's scale and (R1, R3) with r1's
    return _asm_ints(4, (w_r0, w_r1, sel, s_r0, s_r1),
                     _word_f16x2_ptx("x", ("$0", "$2", "$1", "$3"), ("$7", "$8"), "prmt.b32 x, $4, $5, $6;"),
                     loc, ip)


def decode_word_ptx() -> str:
    """PTX of `decode_word`: outputs $0..$3, inputs $4 (the word), $5 (the fp16x2 scale).
    (tests/test_sm90_compile.py interprets this text on every code and scale.)"""
    return _word_f16x2_ptx("$4", ("$0", "$1", "$2", "$3"), ("$5", "$5"))


@dsl_user_op
def decode_word(w: Int32, s: Int32, *, loc=None, ip=None):
    """The 8 codes of one row's word `w` (codes 0..7 = nibbles 0..7) times its scale `s`
    (fp16x2), as four fp16x2 registers in the K order of `decode_a_frag`: (codes 0, 2),
    (1, 3) -- the row's two registers of the step that reads halfword 0 -- then (4, 6),
    (5, 7) for the step that reads halfword 1.  Equals two `decode_a_frag` calls' values
    for this row without their halfword `prmt` (and without decoding a row twice where a
    fragment's two rows are one, e.g. the skinny kernels' single 8-row A group)."""
    return _asm_ints(4, (w, s), decode_word_ptx(), loc, ip)


def skinny_scales_ptx() -> str:
    """PTX of `skinny_scales`: outputs $0 (s0, s0), $1 (s1, s1), input $2 (bytes s0, s1 in its
    low 16 bits).  (tests/test_sm90_compile.py interprets this text on every scale.)"""
    return "\n".join([
        "{",
        ".reg .b32 v;",
        ".reg .b16 q0, q1;",
        "mov.b32 {q0, q1}, $2;",
        "cvt.rn.f16x2.e4m3x2 v, q0;",
        "prmt.b32 $0, v, 0, 0x1010;",
        "prmt.b32 $1, v, 0, 0x3232;",
        "}",
    ])


@dsl_user_op
def skinny_scales(h: Int32, *, loc=None, ip=None):
    """The lane's two e4m3 scales, bytes 0 and 1 of `h` (its 16-code groups 2 tq and 2 tq + 1),
    as fp16x2 pairs (s0, s0) and (s1, s1) for `decode_word`: one conversion for both (the
    skinny loop is issue-bound, notes/sm90.md exp. 47; before: a shift, then a byte select and
    a conversion per scale)."""
    return _asm_ints(2, (h,), skinny_scales_ptx(), loc, ip)


def _ld_shared(addr, ret_type, ptx_type, constraint, loc, ip):
    """One 32-bit `ld.shared` at a 32-bit shared-window address (volatile asm: stays ordered
    with the other shared-memory asm)."""
    return _asm(ret_type(), [Int32(addr).ir_value(loc=loc, ip=ip)],
                f"ld.shared.{ptx_type} $0, [$1];", f"={constraint},r", True, loc=loc, ip=ip)


@dsl_user_op
def ld_shared_u32(addr: Int32, *, loc=None, ip=None) -> Int32:
    return Int32(_ld_shared(addr, T.i32, "b32", "r", loc, ip))


@dsl_user_op
def ld_shared_u16(addr: Int32, *, loc=None, ip=None) -> Int32:
    """16 bits at a 32-bit shared-window address, zero-extended (volatile asm)."""
    return Int32(_ld_shared(addr, T.i32, "u16", "r", loc, ip))


@dsl_user_op
def ld_shared_f32(addr: Int32, *, loc=None, ip=None) -> cutlass.Float32:
    return cutlass.Float32(_ld_shared(addr, T.f32, "f32", "f", loc, ip))


@dsl_user_op
def st_shared_u32(addr: Int32, val: Int32, *, loc=None, ip=None) -> None:
    """One 32-bit `st.shared` at a 32-bit shared-window address (volatile asm)."""
    _asm(None, [Int32(addr).ir_value(loc=loc, ip=ip), Int32(val).ir_value(loc=loc, ip=ip)],
         "st.shared.b32 [$0], $1;", "r,r", True, loc=loc, ip=ip)


@dsl_user_op
def st_shared_v4_u32(addr: Int32, a, b, c, d, *, loc=None, ip=None) -> None:
    """16 bytes (4 words) by one `st.shared.v4.b32` at a 32-bit shared-window address."""
    _asm(None, [Int32(addr).ir_value(loc=loc, ip=ip)] + [Int32(x).ir_value(loc=loc, ip=ip) for x in (a, b, c, d)],
         "st.shared.v4.b32 [$0], {$1, $2, $3, $4};", "r,r,r,r,r", True, loc=loc, ip=ip)


@dsl_user_op
def chunk_swizzled(base: Int32, k: int, x: Int32, *, loc=None, ip=None) -> Int32:
    """base + 16 (k ^ x): 16-byte chunk k of a row whose chunks are XOR-swizzled by x.
    Volatile asm on purpose: kept after the shared-memory asm before it, so the compiler
    cannot compute all of a loop's addresses up front (extra live registers, spills)."""
    return Int32(_asm(T.i32(), [Int32(base).ir_value(loc=loc, ip=ip), Int32(x).ir_value(loc=loc, ip=ip)],
                      "{\n.reg .b32 t;\nxor.b32 t, $2, " + str(int(k)) + ";\nshl.b32 t, t, 4;\n"
                      "add.u32 $0, $1, t;\n}", "=r,r,r", True, loc=loc, ip=ip))


@dsl_user_op
def pack_f16x2(lo: cutlass.Float32, hi: cutlass.Float32, *, loc=None, ip=None) -> Int32:
    """Two fp32 values rounded to fp16 (rn) and packed: `lo` in the low half (the lower
    address when stored), `hi` in the high half."""
    return Int32(
        _asm(
            T.i32(),
            [cutlass.Float32(lo).ir_value(loc=loc, ip=ip), cutlass.Float32(hi).ir_value(loc=loc, ip=ip)],
            "cvt.rn.f16x2.f32 $0, $2, $1;",
            "=r,f,f",
            False, loc=loc, ip=ip,
        )
    )


@dsl_user_op
def prmt(a: Int32, b: Int32, sel: Int32, *, loc=None, ip=None) -> Int32:
    """prmt.b32: bytes of the 64-bit pair {b, a} picked by the 4 selector nibbles."""
    return Int32(
        _asm(
            T.i32(),
            [Int32(a).ir_value(loc=loc, ip=ip), Int32(b).ir_value(loc=loc, ip=ip), Int32(sel).ir_value(loc=loc, ip=ip)],
            "prmt.b32 $0, $1, $2, $3;",
            "=r,r,r,r",
            False, loc=loc, ip=ip,
        )
    )


@dsl_user_op
def st_cluster_f32(addr: Int32, rank: Int32, *vals, loc=None, ip=None) -> None:
    """Store 1 or 4 fp32 at this CTA's shared address `addr` mapped into cluster CTA `rank`
    (mapa + st.shared::cluster[.v4].f32: distributed shared memory)."""
    if len(vals) not in (1, 4):
        raise ValueError(f"st_cluster_f32 stores 1 or 4 values, got {len(vals)}")
    regs = ", ".join(f"${i + 2}" for i in range(len(vals)))
    _asm(
        None,
        [Int32(addr).ir_value(loc=loc, ip=ip), Int32(rank).ir_value(loc=loc, ip=ip)]
        + [cutlass.Float32(x).ir_value(loc=loc, ip=ip) for x in vals],
        "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, $0, $1;\n"
        + ("st.shared::cluster.v4.f32 [ra], {" + regs + "};\n}" if len(vals) == 4 else
           "st.shared::cluster.f32 [ra], " + regs + ";\n}"),
        "r,r" + ",f" * len(vals),
        True, loc=loc, ip=ip,
    )


def _ld_shared_v4(addr, elem, ptx_type, constraint, wrap, loc, ip):
    """4 values at a 32-bit shared-window address (ld.shared.v4; volatile asm: stays ordered
    with the other shared-memory asm, e.g. after the cp.async wait that makes them valid)."""
    res = _asm(
        llvm.StructType.get_literal([elem()] * 4),
        [Int32(addr).ir_value(loc=loc, ip=ip)],
        f"ld.shared.v4.{ptx_type} {{$0, $1, $2, $3}}, [$4];",
        ",".join([f"={constraint}"] * 4 + ["r"]),
        True, loc=loc, ip=ip,
    )
    return tuple(wrap(llvm.extractvalue(elem(), res, [i], loc=loc, ip=ip)) for i in range(4))


@dsl_user_op
def ld_shared_v4_f32(addr: Int32, *, loc=None, ip=None):
    return _ld_shared_v4(addr, T.f32, "f32", "f", cutlass.Float32, loc, ip)


@dsl_user_op
def ld_shared_v4_u32(addr: Int32, *, loc=None, ip=None):
    """16 bytes as 4 words (the skinny kernel's ring slots)."""
    return _ld_shared_v4(addr, T.i32, "b32", "r", Int32, loc, ip)


@dsl_user_op
def cp_async_wait_all(*, loc=None, ip=None) -> None:
    """Wait for this thread's outstanding cp.async copies (no commit groups needed)."""
    _asm(None, [], "cp.async.wait_all;", "", True, loc=loc, ip=ip)


def swizzle128_chunk_addr(base: Int32, row: Int32, chunk: Int32) -> Int32:
    """Shared address of 16-byte chunk `chunk` (0..7) of `row` in a K-major 128B-swizzled
    tile whose rows are 128 bytes (64 fp16 or 128 packed bytes) and whose base is
    1024-byte aligned: 16B chunk index XOR (row % 8)."""
    return base + row * 128 + ((chunk ^ (row & 7)) << 4)


# ------------------------------------------------------------------ global-memory helpers
# (the grouped kernel addresses per-group tensors by raw 64-bit address)


@dsl_user_op
def cp_async_16(dst_smem: Int32, src_gmem: cutlass.Int64, src_bytes: Int32, *, loc=None, ip=None) -> None:
    """cp.async.cg 16 bytes global -> shared; bytes past `src_bytes` (0 or 16) are zero-filled."""
    _asm(
        None,
        [
            Int32(dst_smem).ir_value(loc=loc, ip=ip),
            cutlass.Int64(src_gmem).ir_value(loc=loc, ip=ip),
            Int32(src_bytes).ir_value(loc=loc, ip=ip),
        ],
        "cp.async.cg.shared.global [$0], [$1], 16, $2;",
        "r,l,r",
        True, loc=loc, ip=ip,
    )


@dsl_user_op
def atom_add_acq_rel_gpu(addr: cutlass.Int64, val: Int32, *, loc=None, ip=None) -> Int32:
    """atom.acq_rel.gpu.global.add.u32: returns the old value; releases this thread's earlier
    global stores and acquires those released by the earlier adders of the same word."""
    return Int32(
        _asm(
            T.i32(),
            [cutlass.Int64(addr).ir_value(loc=loc, ip=ip), Int32(val).ir_value(loc=loc, ip=ip)],
            "atom.acq_rel.gpu.global.add.u32 $0, [$1], $2;",
            "=r,l,r",
            True, loc=loc, ip=ip,
        )
    )


# ------------------------------------------------------------- skinny-M kernel (mma.sync)


@dsl_user_op
def mma_m16n8k16_f16(a, b, c, *, loc=None, ip=None):
    """mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32: a = 4 words (fp16x2) of the
    16x16 A fragment, b = 2 words of the 16x8 B fragment, c = 4 fp32; returns D = A B + C
    (fragment layouts of the PTX ISA: lane l holds rows l / 4 and l / 4 + 8, k positions
    2 (l % 4) + {0, 1, 8, 9}; B the same k positions of column l / 4)."""
    res = _asm(
        llvm.StructType.get_literal([T.f32()] * 4),
        [Int32(x).ir_value(loc=loc, ip=ip) for x in a] + [Int32(x).ir_value(loc=loc, ip=ip) for x in b]
        + [cutlass.Float32(x).ir_value(loc=loc, ip=ip) for x in c],
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};",
        "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f",
        False, loc=loc, ip=ip,
    )
    return tuple(cutlass.Float32(llvm.extractvalue(T.f32(), res, [i], loc=loc, ip=ip)) for i in range(4))


@dsl_user_op
def cp_async_16_ca(dst_smem: Int32, src_gmem: cutlass.Int64, *, loc=None, ip=None) -> None:
    """cp.async.ca 16 bytes global -> shared, cached in L1 (data many CTAs of an SM read)."""
    _asm(None, [Int32(dst_smem).ir_value(loc=loc, ip=ip), cutlass.Int64(src_gmem).ir_value(loc=loc, ip=ip)],
         "cp.async.ca.shared.global [$0], [$1], 16;", "r,l", True, loc=loc, ip=ip)


@dsl_user_op
def cp_async_4(dst_smem: Int32, src_gmem: cutlass.Int64, *, loc=None, ip=None) -> None:
    """cp.async.ca 4 bytes global -> shared."""
    _asm(None, [Int32(dst_smem).ir_value(loc=loc, ip=ip), cutlass.Int64(src_gmem).ir_value(loc=loc, ip=ip)],
         "cp.async.ca.shared.global [$0], [$1], 4;", "r,l", True, loc=loc, ip=ip)



# ------------------------------------------------------------- A pre-pass (dual_mixed.py)


@dsl_user_op
def ld_global_nc_v4_u32(addr: cutlass.Int64, *, loc=None, ip=None):
    """16 bytes of read-only global memory as 4 words (ld.global.nc.v4.b32)."""
    res = _asm(llvm.StructType.get_literal([T.i32()] * 4), [cutlass.Int64(addr).ir_value(loc=loc, ip=ip)],
               "ld.global.nc.v4.b32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,l", False, loc=loc, ip=ip)
    return tuple(Int32(llvm.extractvalue(T.i32(), res, [i], loc=loc, ip=ip)) for i in range(4))


@dsl_user_op
def ld_global_nc_u32(addr: cutlass.Int64, *, loc=None, ip=None) -> Int32:
    """One word of read-only global memory (ld.global.nc.b32)."""
    return Int32(_asm(T.i32(), [cutlass.Int64(addr).ir_value(loc=loc, ip=ip)],
                      "ld.global.nc.b32 $0, [$1];", "=r,l", False, loc=loc, ip=ip))


@dsl_user_op
def st_global_v4_u32(addr: cutlass.Int64, a, b, c, d, *, loc=None, ip=None) -> None:
    """16 bytes to global memory (st.global.v4.b32)."""
    _asm(None, [cutlass.Int64(addr).ir_value(loc=loc, ip=ip)] + [Int32(x).ir_value(loc=loc, ip=ip) for x in (a, b, c, d)],
         "st.global.v4.b32 [$0], {$1, $2, $3, $4};", "l,r,r,r,r", True, loc=loc, ip=ip)


# ------------------------------------------------- stream-K partials (dual_mixed.py)


@dsl_user_op
def st_global_v4_f32(addr: cutlass.Int64, a, b, c, d, *, loc=None, ip=None) -> None:
    """4 fp32 to global memory (st.global.v4.f32)."""
    _asm(None, [cutlass.Int64(addr).ir_value(loc=loc, ip=ip)]
         + [cutlass.Float32(x).ir_value(loc=loc, ip=ip) for x in (a, b, c, d)],
         "st.global.v4.f32 [$0], {$1, $2, $3, $4};", "l,f,f,f,f", True, loc=loc, ip=ip)


@dsl_user_op
def st_globaltimer(addr: cutlass.Int64, *, loc=None, ip=None) -> None:
    """The GPU's nanosecond clock (%globaltimer) to 8 bytes of global memory (CTA traces)."""
    _asm(None, [cutlass.Int64(addr).ir_value(loc=loc, ip=ip)],
         "{\n.reg .u64 t;\nmov.u64 t, %globaltimer;\nst.global.u64 [$0], t;\n}", "l", True, loc=loc, ip=ip)


@dsl_user_op
def red_globaltimer(addr: cutlass.Int64, op: str, *, loc=None, ip=None) -> None:
    """%globaltimer into 8 bytes of global memory by red.global.{op}.u64 (op min or max: the
    first / last of many threads' stamps; CTA traces)."""
    _asm(None, [cutlass.Int64(addr).ir_value(loc=loc, ip=ip)],
         f"{{\n.reg .u64 t;\nmov.u64 t, %globaltimer;\nred.global.{op}.u64 [$0], t;\n}}", "l", True, loc=loc, ip=ip)


@dsl_user_op
def ld_acquire_gpu_u32(addr: cutlass.Int64, *, loc=None, ip=None) -> Int32:
    """ld.acquire.gpu.global.u32: a flag another CTA releases (volatile: re-read each spin)."""
    return Int32(_asm(T.i32(), [cutlass.Int64(addr).ir_value(loc=loc, ip=ip)],
                      "ld.acquire.gpu.global.u32 $0, [$1];", "=r,l", True, loc=loc, ip=ip))
