"""custom_kernel rejects bad input with an error naming the constraint, before anything is
written (c keeps its poison)."""

import pytest
import torch

import reference as R
import submission
from nvfp4gemm import dispatch
from nvfp4gemm.validate import InputError, arch_of_capability


def dual(m=256, n=128, k=256, l=1):
    return list(R.generate_input(m, n, k, l, 3, device="cpu"))


def expect_error(data, *words):
    c = data[-1] if len(data) == 10 else data[0][0][2]
    before = c.clone()
    with pytest.raises(InputError) as e:
        submission.custom_kernel(tuple(data))
    for w in words:
        assert w in str(e.value), str(e.value)
    assert torch.equal(c, before), "output written before the error"


def test_k_not_multiple_of_256():
    expect_error(dual(k=384), "K=384", "multiple of 256")


def test_wrong_dtype():
    d = dual()
    d[0] = d[0].view(torch.uint8)
    expect_error(d, "a must have dtype", "float4_e2m1fn_x2")
    d = dual()
    d[-1] = d[-1].float()
    expect_error(d, "c must have dtype torch.float16")
    d = dual()
    d[7] = d[7].view(torch.uint8)
    expect_error(d, "sfb1_perm", "float8_e4m3fn")


def test_mismatched_shapes():
    d = dual()
    d[1] = dual(n=192)[1]
    expect_error(d, "b1 has N=192 rows but c has N=128 columns")  # (N is c's: both sides named)
    d = dual()
    d[2] = dual(k=512)[2]
    expect_error(d, "b2 has K/2=256 packed bytes per row but a has K/2=128 (K=256)")
    d = dual()
    d[4] = dual(n=192)[4]
    expect_error(d, "sfb1 must have shape")
    d = dual()
    d[6] = dual(m=384)[6]
    expect_error(d, "sfa_perm", "permuted shape")


def test_not_k_major():
    d = dual()
    d[0] = d[0].view(torch.uint8).transpose(0, 1).contiguous().transpose(0, 1).view(torch.float4_e2m1fn_x2)
    expect_error(d, "K-major")


def test_cpu_tensors_rejected():
    expect_error(dual(), "a is on cpu", "sm_100", "sm_90")


def test_unsupported_gpu(monkeypatch):
    # Pretend the tensors sit on an sm_80 GPU: the arch check must name it.
    monkeypatch.setattr(dispatch, "validate_device", lambda used: torch.device("cuda", 0))
    monkeypatch.setattr(dispatch, "_capability", lambda dev: (8, 0))
    dispatch._PLANS.clear()
    expect_error(dual(), "sm_80 is not supported", "sm_100", "sm_90")
    assert arch_of_capability((10, 0)) == "sm_100a" and arch_of_capability((9, 0)) == "sm_90a"
    with pytest.raises(InputError, match="sm_120"):
        arch_of_capability((12, 0))


def test_arch_specific_shape_rule(monkeypatch):
    # Ragged dual M passes the arch-independent checks (the sm_90a kernel takes it), but on
    # a B200 the sm_100a kernel's M % 128 rule must stop it before anything is written.
    monkeypatch.setattr(dispatch, "validate_device", lambda used: torch.device("cuda", 0))
    monkeypatch.setattr(dispatch, "_capability", lambda dev: (10, 0))
    dispatch._PLANS.clear()
    expect_error(dual(m=200), "sm_100a dual kernel", "M=200 must be a multiple of 128")
    dispatch._PLANS.clear()


def test_grouped_errors():
    g = R.generate_input([40, 128], [128, 256], [256, 512], 2, 1, device="cpu")
    bad = (g[0], g[1], g[2], g[3][:1])
    expect_error(bad, "one entry per group")
    sizes = [(40, 128, 256, 1), (128, 256, 500, 1)]
    expect_error((g[0], g[1], g[2], sizes), "group 1")
    g2 = R.generate_input([40], [100], [256], 1, 1, device="cpu")
    expect_error(g2, "N=100 must be a multiple of 64")


def _row_padded(x, pad_bytes=16):
    """x's values in a tensor of x's shape whose rows are `pad_bytes` longer than K/2 (a view)."""
    m, kh, l = x.shape
    buf = torch.empty(l, m, kh + pad_bytes, dtype=torch.uint8)
    view = buf[:, :, :kh].permute(1, 2, 0)
    view.copy_(x.view(torch.uint8))
    return view.view(x.dtype)


def _batch_gap(x):
    """x's values with a gap between its batches (stride(2) larger than one batch)."""
    raw = x.view(torch.uint8) if x.dtype == torch.float4_e2m1fn_x2 else x
    m, n, l = raw.shape
    view = torch.empty(l, m + 1, n, dtype=raw.dtype)[:, :m].permute(1, 2, 0)
    view.copy_(raw)
    return view.view(x.dtype)


def test_layout_errors():
    """Layouts the kernels cannot read, each named: a permuted scale tensor made contiguous, one
    of another shape, an operand with padded rows, batches of an operand or of C with gaps."""
    d = dual()
    d[6] = d[6].contiguous()
    expect_error(d, "sfa_perm", "permutation (3,4,1,5,2,0)")
    d = dual()
    d[8] = dual(n=256)[8]
    expect_error(d, "sfb2_perm", "permuted shape")
    d = dual()
    d[0] = _row_padded(d[0])
    expect_error(d, "a must be K-major")
    d = dual()
    d[2] = _row_padded(d[2])
    expect_error(d, "b2 must be K-major")
    d = dual(l=2)
    d[1] = _batch_gap(d[1])
    expect_error(d, "b1: batches must be contiguous")
    d = dual(l=2)
    d[-1] = _batch_gap(d[-1])
    expect_error(d, "c must be row-major per batch")
    g = R.generate_input([40, 128], [128, 256], [256, 512], 2, 1, device="cpu")
    g[2][1] = (g[2][1][0], g[2][1][1].contiguous())
    expect_error(g, "group 1: sfb_perm", "permutation")
    g = R.generate_input([40, 128], [128, 256], [256, 384], 2, 1, device="cpu")
    expect_error(g, "group 1: K=384 must be a multiple of 256")


@pytest.mark.parametrize("bad", [(1, 2, 3, 4), ([1], [2], [3], [(1, 2, 3, 1)]), "abcd", 5])
def test_malformed_input_structure(bad):
    """Inputs that are not even the leaderboard's nested tuples get an InputError naming the
    expected structure (the dispatcher's signature path must not turn them into TypeErrors)."""
    from nvfp4gemm import dispatch

    with pytest.raises(InputError, match="must be"):
        dispatch.custom_kernel(bad)


def test_outputs_must_not_overlap():
    """An output sharing memory with another output or with an input is refused, naming both (the
    kernels would race or read what they wrote, without an error); inputs may share memory."""
    g = R.generate_input([128, 128], [128, 128], [256, 256], 2, 1, device="cpu")
    g[0][1] = (g[0][1][0], g[0][1][1], g[0][0][2])  # group 1 writes group 0's c
    expect_error(g, "group 1: c overlaps group 0: c in memory", "must not overlap")
    g = R.generate_input([128, 128], [128, 128], [256, 256], 2, 1, device="cpu")
    sfa = torch.tensor([], dtype=torch.float8_e4m3fn).set_(g[0][0][2].untyped_storage(), 0, (128, 16, 1), (16, 1, 2048))
    g[1][0] = (sfa, g[1][0][1])  # group 0's plain sfa in c's bytes
    expect_error(g, "group 0: c overlaps group 0: sfa in memory")
    d = dual()
    m, n = d[-1].shape[:2]
    buf = torch.empty(m * n * 2, dtype=torch.uint8)
    a = buf[:d[0].numel()].view(d[0].shape[0], -1).unsqueeze(-1).view(torch.float4_e2m1fn_x2)
    a.copy_(d[0])
    d[0], d[-1] = a, buf.view(torch.float16).view(m, n, 1)  # c over a's bytes
    d[-1].fill_(-3.0)  # (a poison expect_error can compare: NaN != NaN)
    expect_error(d, "c overlaps a in memory")
    d = dual()
    d[2] = d[1]  # (B2 = B1: inputs may alias)
    with pytest.raises(InputError, match="a is on cpu"):  # (validation passed; CPU tensors refused next)
        submission.custom_kernel(tuple(d))


def test_grouped_sizes_checked_first_and_as_integers():
    """problem_sizes: each entry four integers, and a group's sizes checked before its tensors (a
    group of M = 0 is named so, not as a scale tensor that fails to match it)."""
    g = R.generate_input([40, 128], [128, 256], [256, 512], 2, 1, device="cpu")
    expect_error((g[0], g[1], g[2], [g[3][0], (0, 256, 512, 1)]), "group 1: M=0 must be >= 1")
    expect_error((g[0], g[1], g[2], [g[3][0], (128, 256, 0, 1)]), "group 1: K=0 must be >= 1")
    expect_error((g[0], g[1], g[2], [5, g[3][1]]), "problem_sizes[0] must be (M, N, K, L), got 5")
    expect_error((g[0], g[1], g[2], [(40, 128, 256.9, 1), g[3][1]]), "problem_sizes[0] must be four integers")
