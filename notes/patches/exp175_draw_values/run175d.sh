# Exp. 175d: per kernel of the 3rd and 4th custom_kernel calls, duration, SM cycles and the
# SM clock while it ran, for each draw's values (same buffers).  bash run175d.sh CASE_INDEX
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for v in lb wide lb wide; do
  echo "=== values $v"
  NVFP4_GRAPHS=0 $NCU --clock-control none -k regex:cutlass --launch-skip 0 --launch-count 200 \
    --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \
    python3 notes/patches/exp175_draw_values/prof175.py $v $1 4 2>&1 | grep -v "^==PROF==\|Warn" \
    | grep -E "^  [a-zA-Z_].*\(|gpu__time|sm__cycles|hmma|inst_executed" | cut -c1-120 | tail -24
done
