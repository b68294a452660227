S="$(cat scratch/exp108_lb0.txt);$(cat scratch/exp108_lb1.txt);128x4096x7168/128x4096x7168/128x4096x7168/128x4096x7168/128x4096x7168/128x4096x7168/128x4096x7168/128x4096x7168;1x512x2048/7x256x1024/33x768x2048/130x512x512/257x256x2048/300x1024x1536"
for v in 0 1 0 1; do
  echo "=== NVFP4_EXP109=$v"
  NVFP4_EXP109=$v python3 benchmarks/forms.py --problem group --forms rule,mixed256 --shapes "$S" --rounds 3 --iters 20 --json $OUT/exp109_$v.json 2>&1 | grep "x1\.\|x0\.\|WRONG\|rror"
done
