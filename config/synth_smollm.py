# The experiment on the embedded default: SmolLM2-135M-Instruct on the synthetic arithmetic task, enough
# problems for a result above noise (200 training problems x 16 samples, 300 held-out x 8), 5 seeds.
# Eight layers are stored once so the layer ablation needs no second extraction; HSRM reads the final
# layer unless verifier_layers says otherwise.
# Measured 2026-11-23 on splits disjoint by question string only (before the operand-multiset split): RESULTS.md,
# Earlier results, "Synthetic experiment" at c75fdeb (HSRM not distinguishable from majority vote and from mean
# log-prob). The pruning study (steer.py --prune=True) with thresholds from a separate calibration
# split (200 fresh problems x 8) instead of the 40 validation problems:
#   python extract.py config/synth_smollm.py --out_dir=out/synth_smollm_calib --train_range=None \
#     --eval_range="(1525,1724)"
#   python label.py config/synth_smollm.py --out_dir=out/synth_smollm_calib
#   python -m studies.steer config/synth_smollm.py --prune=True --calib_dir=out/synth_smollm_calib/eval
out_dir = 'out/synth_smollm'
model = 'smollm2'
dataset = 'synth'
synth_level = 2
train_range = (0, 199)
eval_range = (1225, 1524)  # level 2 splits by operand multiset: 0-1224 training, 1225-1898 evaluation
n_train_samples = 16
n_eval_samples = 8
max_new_tokens = 64
temperature = 0.8
top_p = 0.95
batch_size = 64
layers = [-1, -2, -3, -4, 6, 12, 18, 24]
verifier_layers = [-1]
seeds = [42, 123, 456, 789, 1024]
max_iters = 300  # 160 training problems: 300 steps of 8 problems is 15 epochs
eval_interval = 25
deepconf_window = 16  # traces are ~36 tokens: the paper's 2048 would make each one group, never stopped online
deepconf_tail = 32
text_sizes = ['small']  # the 53M text verifier needs ~400 GFLOP per step here: a GPU job
