# Problems or samples (issue 54), at equal optimizer steps: at a fixed budget of 8,000 extracted training candidates
# on synthetic level 2 (grouped split: no evaluation question shares its operand multiset with a training one), does
# HSRM need more problems or more samples of each? Every arm trains exactly 1,000 steps (the paper's count; at about
# 1,000 problems 20 epochs is about as many, and the curve's fixed-1,000-steps control was level with it there). The
# arms differ in their data and in what a step holds (64, 256 or 512 candidates a batch, by samples a problem), and
# each keeps its own best-validation step. The cells, on the main job's evaluation split (RESULTS.md's numbers:
# 1225-1524 x 8, before it grew to 1225-1898):
#   x8 @ 1000          the main job's training extraction (0-1224 x 8), K = 1,000 of it (about 800 train)
#   x32 @ 250          problems 0-249 x 32                          (out/samples_synth2_x32, sampling seed 1338)
#   x64 @ 125          problems 0-124 x 64                          (out/samples_synth2_x64, sampling seed 1339)
#   x32_first8 @ 250   the same 250 problems, each one's first 8 of its 32 candidates (n_candidates=8): the
#                      same problems with a quarter of the samples
# K counts training + validation problems (cut 80/20 by multiset); each cell 3 seeds. The loop below names three
# validation draws; one ran (val_seed 42: RESULTS.md).
# After the main job (python extract.py config/demo.py && python label.py config/demo.py):
#   for n in 32 64; do python extract.py config/samples_synth2.py --out_dir=out/samples_synth2_x$n --eval_range=None \
#     --train_range="(0, $((8000 / n - 1)))" --n_train_samples=$n --seed=$((1337 + n / 32)) \
#     && python label.py config/samples_synth2.py --out_dir=out/samples_synth2_x$n; done
#   for v in 42 43 44; do d=out/samples_synth2_v$v; mkdir -p $d && ln -sfn $PWD/out/demo/train $d/train \
#     && ln -sfn $PWD/out/demo/eval $d/eval \
#     && python -m studies.curve config/samples_synth2.py --out_dir=$d --val_seed=$v --threads=1; done
out_dir = 'out/samples_synth2'
model = 'smollm2'
dataset = 'synth'
synth_level = 2
train_range = (0, 1224)
eval_range = (1225, 1524)
n_train_samples = 8
n_eval_samples = 8
max_new_tokens = 64  # config/curve_synth2.py's sampling
temperature = 0.8
top_p = 0.95
batch_size = 128
layers = [-1]
sizes = [125, 250, 1000]
# each variant at the one K of its cell (a variant's own 'sizes', curve.py)
variants = {'x8': {'sizes': [1000]},
            'x32': {'train_dirs': ['out/samples_synth2_x32/train'], 'sizes': [250]},
            'x32_first8': {'train_dirs': ['out/samples_synth2_x32/train'], 'n_candidates': 8, 'sizes': [250]},
            'x64': {'train_dirs': ['out/samples_synth2_x64/train'], 'sizes': [125]}}
seeds = [42, 123, 456]
train_overrides = {'epochs': None, 'max_iters': 1000, 'eval_interval': 25}
pairs = [('x32@250', 'x8@1000'), ('x64@125', 'x8@1000'), ('x64@125', 'x32@250'),  # equal candidates and steps
         ('x32@250', 'x32_first8@250')]  # the same problems, 4x the samples
