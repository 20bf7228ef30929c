# The data-need curve: how HSRM and the free scorers grow with the number of training problems.
# Synthetic level 2 (1,899 distinct questions on 165 operand multisets), split by multiset (tasks.py): train
# indices 0-1224 x 8 (110 multisets), eval 1225-1898 x 8 (674 problems on the 55 others: no evaluation question
# shares its numbers with a training one). K = max_train_problems draws nested subsets of the training split (each
# then cut 80/20 by multiset into train / validation), so K = 1225 trains on about 980 problems.
# As run 2026-11-25 (RESULTS.md), on 2 cores: extract 21 min, label 1 min, every run of one variant about 8 min:
#   python extract.py config/curve_synth2.py && python label.py config/curve_synth2.py
# (the parts train in parallel; the last call reports all)
#   python -m studies.curve config/curve_synth2.py --sizes="[80, 160, 320, 640]" --threads=1 &
#   python -m studies.curve config/curve_synth2.py --sizes="[1225]" --threads=1
#   python -m studies.curve config/curve_synth2.py --threads=1
# two more validation draws (val_seed draws the K subsets and the validation cut), on the same extraction:
#   for v in 43 44; do mkdir -p out/curve_synth2g_v$v \
#     && ln -sfn $PWD/out/curve_synth2g/train out/curve_synth2g_v$v/train \
#     && ln -sfn $PWD/out/curve_synth2g/eval out/curve_synth2g_v$v/eval \
#     && python -m studies.curve config/curve_synth2.py \
#     --out_dir=out/curve_synth2g_v$v --val_seed=$v --variants="{'hsrm': {'verifier_layers': [-1]}, \
#     'residual': {'residual': 'auto', 'verifier_layers': [-1]}}" --threads=1; done
out_dir = 'out/curve_synth2g'  # g: the grouped split (out/curve_synth2 holds an extraction made before it)
model = 'smollm2'
dataset = 'synth'
synth_level = 2
train_range = (0, 1224)
eval_range = (1225, 1898)
n_train_samples = 8
n_eval_samples = 8
max_new_tokens = 64
temperature = 0.8
top_p = 0.95
batch_size = 128
layers = [-1, -2, -3, -4]
verifier_layers = [-1]
# curve.py: sizes K (training + validation problems; K = 1225 trains on about 980), variants, 3 seeds, epochs
sizes = [80, 160, 320, 640, 1225]
# hsrm_steps1000: the paper's fixed 1,000 steps at every K (best validation step kept), so data and steps separate
variants = {'hsrm': {'verifier_layers': [-1]}, 'residual': {'residual': 'auto', 'verifier_layers': [-1]},
            'hsrm_top4': {'verifier_layers': [-1, -2, -3, -4]},
            'hsrm_steps1000': {'verifier_layers': [-1], 'epochs': None, 'max_iters': 1000}}
seeds = [42, 123, 456]
train_overrides = {'epochs': 20, 'eval_interval': 25}
