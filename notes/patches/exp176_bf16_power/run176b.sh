# Exp. 176b: SM clock and cycles of each cuBLAS matmul kernel of prof176.py under ncu.
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
$NCU --clock-control none -k regex:"nvjet|gemm|xmma" \
  --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_elapsed.avg.per_second \
  python3 notes/patches/exp176_bf16_power/prof176.py 2>&1 | grep -v "^==PROF==\|Warn" \
  | grep -E "^OP|^  [a-zA-Z_].*\(|gpu__time|sm__cycles" | cut -c1-100
