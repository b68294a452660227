NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
for f in "narrow 128" "wide 256" "n192 192" "m128 128"; do
  set -- $f
  echo "=== $1 M=$2"
  $NCU --clock-control none -k regex:"^kernel_cutlass_kernel_" --launch-skip 2 --launch-count 1 \
    --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats --section SpeedOfLight \
    --metrics sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fp16.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__cycles_elapsed.avg \
    python3 notes/patches/exp110_ncu/prof.py $1 $2 2>&1 | grep -v "^==PROF==\|Warn" | grep -i "pipe\|stall\|Duration\|Issue\|Executed Ipc\|cycles\|inst_executed\|Throughput\|Warp Cycles\|Eligible\|Active Warps\|hmma\|xu\|alu\|fma" | head -60
done
