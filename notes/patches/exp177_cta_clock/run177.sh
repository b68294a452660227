# Exp. 177: SM cycles and in-kernel SM clock of the grouped mixed kernel at 32-132 CTAs.
# bash run177.sh OUTDIR  (full ncu lines in OUTDIR/ncu177.txt; one compact line per kernel printed)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for sf in "U128 narrow" "U256 wide"; do
  for c in 32 64 128 0; do
    echo "=== $sf ctas $c"
    $NCU --clock-control none -k regex:cutlass --launch-count 20 \
      --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum \
      python3 notes/patches/exp177_cta_clock/exp177.py prof $sf $c 2>&1 | grep -v "^==PROF==\|Warn" \
      | grep -E "^  [a-zA-Z_].*\(|gpu__time|sm__cycles|hmma|dram__|done|Error|error" | cut -c1-110
  done
done > $1/ncu177.txt
awk '/^===/{print; next} /^  kernel/{k=($0 ~ /prepass/) ? "pre " : "main"} /dram__/{d=$NF} /gpu__time/{t=$NF}
     /per_second/{g=$NF} /cycles_elapsed.max/{c=$NF} /hmma/{printf "  %s %s us %s GHz %s cyc tensor %s%% dram %s MB\n", k, t, g, c, $NF, d}' $1/ncu177.txt
