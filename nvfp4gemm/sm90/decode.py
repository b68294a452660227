"""In-kernel NVFP4 decode for sm_90a: packed e2m1 + e4m3 scale -> fp16, exact.

sm_90a has no `cvt.rn.f16x2.e2m1x2` (ptxas rejects it), so the decode is bit placement:

* e2m1 nibble s e1 e0 m0 -> fp16 bits (s << 15) | (e1 e0 m0 << 9).  That fp16 is the
  e2m1 value times 2^-14 for all 16 codes (0.5 becomes the subnormal 0x0200).
* e4m3 scale -> fp16 with `cvt.rn.f16x2.e4m3x2` (sm_89+, exact: e4m3 fits fp16).
* One `mul.rn.f16x2` (no .ftz) applies the scale: |code| * 2^-14 * scale is a multiple of
  2^-24 with at most 6 significant bits and at most 6 * 448 * 2^-14, so the product is
  exact in fp16 (subnormals included) and never overflows.

Both wgmma operands carry the 2^-14 factor, so the fp32 accumulator holds the true value
times 2^-28; the epilogue multiplies by `acc_rescale(True)` = 2^28 (exact in fp32).

K order inside the decoded tile: a 32-bit word holds 8 consecutive e2m1 codes e0..e7
(e0 in the low nibble); it is written as the 16-byte fp16 chunk (e0,e4,e1,e5,e2,e6,e3,e7).
Both operands use the same permutation, which stays inside one 16-element scale group, so
the dot products are unchanged.

Shared-memory helpers take 32-bit shared-window addresses (`ptr.toint()` of an smem ptr).
"""

import cutlass
from cutlass import Int32
from cutlass.cutlass_dsl import T, dsl_user_op
from cutlass._mlir.dialects import llvm



def _asm(ret_type, operands, text, constraints, loc=None, ip=None):
    return llvm.inline_asm(
        ret_type,
        operands,
        text,
        constraints,
        has_side_effects=False,
        is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT,
        loc=loc,
        ip=ip,
    )


def _decode_word_ptx(w: str, s2: str, outs: list) -> str:
    """PTX that decodes 8 codes in register `w` with half2 scale `s2` into 4 half2 `outs`."""
    lines = []
    for j in range(4):
        mag_shift = 9 - 4 * j
        sgn_shift = 12 - 4 * j
        if mag_shift >= 0:
            lines.append(f"shl.b32 t, {w}, {mag_shift};")
        else:
            lines.append(f"shr.b32 t, {w}, {-mag_shift};")
        lines.append("and.b32 t, t, 0x0E000E00;")
        if sgn_shift > 0:
            lines.append(f"shl.b32 u, {w}, {sgn_shift};")
            lines.append("lop3.b32 t, t, u, 0x80008000, 0xF8;")
        else:
            lines.append(f"lop3.b32 t, t, {w}, 0x80008000, 0xF8;")
        lines.append(f"mul.rn.f16x2 {outs[j]}, t, {s2};")
    return "\n".join(lines)


def _decode_word_cvt_ptx(w: str, s2: str, outs: list) -> str:
    """PTX that decodes 8 codes in `w` through e4m3: code s e1 e0 m0 -> e4m3 byte
    (s << 7) | (e1 e0 m0 << 2), which is the e2m1 value times 2^-6 for all 16 codes
    (e2m1's subnormal 0.5 lands on e4m3's subnormal 2^-7); then one cvt.rn.f16x2.e4m3x2
    per pair.  7 integer ops per 8 codes instead of 15 for `_decode_word_ptx`.
    Output order: (c0,c2), (c1,c3), (c4,c6), (c5,c7)."""
    return "\n".join([
        f"shr.b32 t, {w}, 2;",
        "and.b32 t, t, 0x1C1C1C1C;",
        f"lop3.b32 eo, {w}, t, 0x80808080, 0xEC;",   # odd codes: sign already at bit 7
        f"shl.b32 t, {w}, 2;",
        "and.b32 t, t, 0x1C1C1C1C;",
        f"shl.b32 u, {w}, 4;",
        "lop3.b32 ee, t, u, 0x80808080, 0xF8;",     # even codes: sign bit 3 -> 7
        "mov.b32 {q0, q1}, ee;",
        "mov.b32 {q2, q3}, eo;",
        "cvt.rn.f16x2.e4m3x2 t, q0;",
        f"mul.rn.f16x2 {outs[0]}, t, {s2};",
        "cvt.rn.f16x2.e4m3x2 t, q2;",
        f"mul.rn.f16x2 {outs[1]}, t, {s2};",
        "cvt.rn.f16x2.e4m3x2 t, q1;",
        f"mul.rn.f16x2 {outs[2]}, t, {s2};",
        "cvt.rn.f16x2.e4m3x2 t, q3;",
        f"mul.rn.f16x2 {outs[3]}, t, {s2};",
    ])


def _ee_eo_ptx(w: str, ee: str, eo: str) -> str:
    """e4m3 bytes of the even codes (ee) and odd codes (eo) of the 8 codes in `w`:
    byte k of ee/eo is the e4m3 form of code 2k / 2k+1 (see _decode_word_cvt_ptx)."""
    return "\n".join([
        f"shr.b32 t, {w}, 2;",
        "and.b32 t, t, 0x1C1C1C1C;",
        f"lop3.b32 {eo}, {w}, t, 0x80808080, 0xEC;",
        f"shl.b32 t, {w}, 2;",
        "and.b32 t, t, 0x1C1C1C1C;",
        f"shl.b32 u, {w}, 4;",
        f"lop3.b32 {ee}, t, u, 0x80808080, 0xF8;",
    ])


# Decoded operands carry 2^-6 (cvt path) or 2^-14 (bit path) each; the accumulator is
# multiplied back by the square.
def acc_rescale(bit_decode: bool) -> float:
    return float(2**28) if bit_decode else float(2**12)


@dsl_user_op
def decode_task(src_addr: Int32, scale_word: Int32, scale_shift: Int32, dst_addr: Int32,
                bit_decode: bool = False, store: bool = True, perm: bool = False,
                *, loc=None, ip=None) -> None:
    """Decode 32 consecutive e2m1 codes (16 bytes at shared `src_addr`) into four 16-byte
    fp16 chunks at shared `dst_addr ^ (16 * q)`, q = 0..3 (the 128B-swizzle row of the
    decoded tile: the caller passes the address of chunk q = 0 already swizzled).
    `scale_word` holds 4 e4m3 scales (one per 16 codes of a 64-code row segment);
    `scale_shift` (0 or 16) selects the two that cover these 32 codes."""
    dec = _decode_word_ptx if bit_decode else _decode_word_cvt_ptx
    if perm:
        return _decode_task_perm(src_addr, scale_word, scale_shift, dst_addr, store, loc=loc, ip=ip)
    body = [
        "{",
        ".reg .b32 w0, w1, w2, w3, t, u, s0, s1, sb0, sb1, a1, a2, a3, ee, eo;",
        ".reg .b32 o<16>;",
        ".reg .b16 h0, h1, h2, h3, q0, q1, q2, q3;",
        "ld.shared.v4.b32 {w0, w1, w2, w3}, [$0];",
        # scales of these 32 codes: bytes 0 and 1 of (scale_word >> scale_shift); prmt
        # replicates one byte so the low 16 bits hold (s, s) for the x2 conversion
        "shr.b32 t, $1, $2;",
        "prmt.b32 sb0, t, 0, 0x0000;",
        "prmt.b32 sb1, t, 0, 0x1111;",
        "mov.b32 {h0, h1}, sb0;",
        "mov.b32 {h2, h3}, sb1;",
        "cvt.rn.f16x2.e4m3x2 s0, h0;",
        "cvt.rn.f16x2.e4m3x2 s1, h2;",
        dec("w0", "s0", ["o0", "o1", "o2", "o3"]),
        dec("w1", "s0", ["o4", "o5", "o6", "o7"]),
        dec("w2", "s1", ["o8", "o9", "o10", "o11"]),
        dec("w3", "s1", ["o12", "o13", "o14", "o15"]),
        "xor.b32 a1, $3, 16;",
        "xor.b32 a2, $3, 32;",
        "xor.b32 a3, $3, 48;",
        "st.shared.v4.b32 [$3], {o0, o1, o2, o3};",
        "st.shared.v4.b32 [a1], {o4, o5, o6, o7};",
        "st.shared.v4.b32 [a2], {o8, o9, o10, o11};",
        "st.shared.v4.b32 [a3], {o12, o13, o14, o15};",
        "}",
    ]
    if not store:  # experiment only: decode without writing the tile
        body = [x for x in body if not x.startswith("st.shared")]
    llvm.inline_asm(
        None,
        [
            Int32(src_addr).ir_value(loc=loc, ip=ip),
            Int32(scale_word).ir_value(loc=loc, ip=ip),
            Int32(scale_shift).ir_value(loc=loc, ip=ip),
            Int32(dst_addr).ir_value(loc=loc, ip=ip),
        ],
        "\n".join(body),
        "r,r,r,r",
        has_side_effects=True,
        is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT,
        loc=loc,
        ip=ip,
    )


def _decode_task_perm(src_addr, scale_word, scale_shift, dst_addr, store, loc=None, ip=None):
    """decode_task for a B tile that pairs with an A operand decoded into wgmma registers
    (`decode_a_frag`).  K order inside each 16-code group g (words w0 = codes 0..7,
    w1 = codes 8..15): fp16 positions 0..7 hold codes (0,2),(4,6),(8,10),(12,14) and
    positions 8..15 hold (1,3),(5,7),(9,11),(13,15) -- the even / odd e4m3 bytes of w0, w1
    converted low half then high half.  Thread c of the A fragment owns positions
    {2c, 2c+1, 2c+8, 2c+9}, i.e. codes 4c..4c+3: one 16-bit halfword of packed data."""
    lines = []
    for wi in range(4):
        lines.append(_ee_eo_ptx(f"w{wi}", f"e{wi}", f"d{wi}"))
    outs = []
    for grp in range(2):
        s2 = f"s{grp}"
        for kind in ("e", "d"):  # even codes -> chunk 2*grp, odd -> chunk 2*grp+1
            for wi in (2 * grp, 2 * grp + 1):
                for half in (0, 1):
                    o = f"o{len(outs)}"
                    outs.append(o)
                    lines.append(f"mov.b32 {{q0, q1}}, {kind}{wi};")
                    lines.append(f"cvt.rn.f16x2.e4m3x2 t, {'q0' if half == 0 else 'q1'};")
                    lines.append(f"mul.rn.f16x2 {o}, t, {s2};")
    body = [
        "{",
        ".reg .b32 w0, w1, w2, w3, t, u, s0, s1, sb0, sb1, a1, a2, a3, e0, e1, e2, e3, d0, d1, d2, d3;",
        ".reg .b32 o<16>;",
        ".reg .b16 h0, h1, h2, h3, q0, q1;",
        "ld.shared.v4.b32 {w0, w1, w2, w3}, [$0];",
        "shr.b32 t, $1, $2;",
        "prmt.b32 sb0, t, 0, 0x0000;",
        "prmt.b32 sb1, t, 0, 0x1111;",
        "mov.b32 {h0, h1}, sb0;",
        "mov.b32 {h2, h3}, sb1;",
        "cvt.rn.f16x2.e4m3x2 s0, h0;",
        "cvt.rn.f16x2.e4m3x2 s1, h2;",
        "\n".join(lines),
        "xor.b32 a1, $3, 16;",
        "xor.b32 a2, $3, 32;",
        "xor.b32 a3, $3, 48;",
    ]
    if store:
        body += [
            "st.shared.v4.b32 [$3], {o0, o1, o2, o3};",
            "st.shared.v4.b32 [a1], {o4, o5, o6, o7};",
            "st.shared.v4.b32 [a2], {o8, o9, o10, o11};",
            "st.shared.v4.b32 [a3], {o12, o13, o14, o15};",
        ]
    body.append("}")
    llvm.inline_asm(
        None,
        [
            Int32(src_addr).ir_value(loc=loc, ip=ip),
            Int32(scale_word).ir_value(loc=loc, ip=ip),
            Int32(scale_shift).ir_value(loc=loc, ip=ip),
            Int32(dst_addr).ir_value(loc=loc, ip=ip),
        ],
        "\n".join(body),
        "r,r,r,r",
        has_side_effects=True,
        is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT,
        loc=loc,
        ip=ip,
    )


@dsl_user_op
def scale_half2(scale_word: Int32, sel: int, *, loc=None, ip=None) -> Int32:
    """(s, s) as fp16x2 for e4m3 byte `sel` (0..3) of `scale_word`."""
    return Int32(
        llvm.inline_asm(
            T.i32(),
            [Int32(scale_word).ir_value(loc=loc, ip=ip)],
            "{\n.reg .b32 t;\n.reg .b16 h0, h1;\n"
            f"prmt.b32 t, $1, 0, {0x1111 * sel};\nmov.b32 {{h0, h1}}, t;\n"
            "cvt.rn.f16x2.e4m3x2 $0, h0;\n}",
            "=r,r",
            has_side_effects=False,
            is_align_stack=False,
            asm_dialect=llvm.AsmDialect.AD_ATT,
            loc=loc,
            ip=ip,
        )
    )


@dsl_user_op
def decode_a_frag(w_r0: Int32, w_r1: Int32, sel: Int32, s_r0: Int32, s_r1: Int32,
                  *, loc=None, ip=None):
    """wgmma A-fragment registers (R0..R3) of one k16 group for rows r0 and r1 = r0 + 8:
    `sel` picks this thread's 16-bit halfword out of the words `w_r0`, `w_r1` (0x5410 or
    0x7632); R0 = (r0, pos 2c..2c+1), R1 = (r1, same), R2 = (r0, pos 2c+8..2c+9),
    R3 = (r1, same), in the K order of `_decode_task_perm`; s_r0 / s_r1 are the rows'
    scales as fp16x2."""
    res = llvm.inline_asm(
        llvm.StructType.get_literal([T.i32(), T.i32(), T.i32(), T.i32()]),
        [Int32(w_r0).ir_value(loc=loc, ip=ip), Int32(w_r1).ir_value(loc=loc, ip=ip),
         Int32(sel).ir_value(loc=loc, ip=ip), Int32(s_r0).ir_value(loc=loc, ip=ip),
         Int32(s_r1).ir_value(loc=loc, ip=ip)],
        "\n".join([
            "{",
            ".reg .b32 x, t, u, ee, eo, v;",
            ".reg .b16 q0, q1;",
            "prmt.b32 x, $4, $5, $6;",
            _ee_eo_ptx("x", "ee", "eo"),
            "mov.b32 {q0, q1}, ee;",
            "cvt.rn.f16x2.e4m3x2 v, q0;",
            "mul.rn.f16x2 $0, v, $7;",
            "cvt.rn.f16x2.e4m3x2 v, q1;",
            "mul.rn.f16x2 $1, v, $8;",
            "mov.b32 {q0, q1}, eo;",
            "cvt.rn.f16x2.e4m3x2 v, q0;",
            "mul.rn.f16x2 $2, v, $7;",
            "cvt.rn.f16x2.e4m3x2 v, q1;",
            "mul.rn.f16x2 $3, v, $8;",
            "}",
        ]),
        "=r,=r,=r,=r,r,r,r,r,r",
        has_side_effects=False,
        is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT,
        loc=loc,
        ip=ip,
    )
    return tuple(Int32(llvm.extractvalue(T.i32(), res, [i], loc=loc, ip=ip)) for i in range(4))


@dsl_user_op
def ld_shared_u32(addr: Int32, *, loc=None, ip=None) -> Int32:
    return Int32(
        llvm.inline_asm(
            T.i32(),
            [Int32(addr).ir_value(loc=loc, ip=ip)],
            "ld.shared.b32 $0, [$1];",
            "=r,r",
            has_side_effects=True,
            is_align_stack=False,
            asm_dialect=llvm.AsmDialect.AD_ATT,
            loc=loc,
            ip=ip,
        )
    )


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
    llvm.inline_asm(
        None,
        [
            Int32(dst_smem).ir_value(loc=loc, ip=ip),
            cutlass.Int64(src_gmem).ir_value(loc=loc, ip=ip),
            Int32(src_bytes).ir_value(loc=loc, ip=ip),
        ],
        "cp.async.cg.shared.global [$0], [$1], 16, $2;",
        "r,l,r",
        has_side_effects=True,
        is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT,
        loc=loc,
        ip=ip,
    )
