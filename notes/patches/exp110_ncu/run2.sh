NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
R="long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle barrier membar dispatch_stall not_selected selected no_instruction lg_throttle sleeping branch_resolving misc"
M="sm__cycles_elapsed.avg,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__warps_eligible.avg.per_cycle_active"
for r in $R; do M="$M,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"; done
for f in "narrow 128" "wide 256"; do
  set -- $f
  echo "=== $1 M=$2"
  $NCU --clock-control none -k regex:"^kernel_cutlass_kernel_" --launch-skip 2 --launch-count 1 --metrics $M \
    python3 notes/patches/exp110_ncu/prof.py $1 $2 2>&1 | grep -v "^==PROF==\|Warn" | grep "sm__\|smsp__" | sed 's/  */ /g'
done
