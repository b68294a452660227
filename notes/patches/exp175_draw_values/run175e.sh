# Exp. 175e: duration, SM cycles and SM clock of every kernel of prof175e.py.
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
NVFP4_GRAPHS=0 $NCU --clock-control none --launch-count 200 \
  --metrics gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_elapsed.avg.per_second \
  python3 notes/patches/exp175_draw_values/prof175e.py 2>&1 | grep -v "^==PROF==\|Warn" \
  | grep -E "^  [a-zA-Z_].*\(|gpu__time|sm__cycles" | cut -c1-100
