# Online pruning (issue 13) on a 4-step synthetic level: SmolLM2-135M-Instruct, level 3 (`Compute 7 - 2 + 8 + 1.`:
# "Step 1..3" lines and "The answer is" line = 4 steps), between level 2 (3 steps) and level 4 (uninformative).
# HSRM with and without prefix training; steer.py simulates pruning and DeepConf on the same pools.
#   for s in extract label; do python $s.py config/prune_synth3.py; done   (extract with --threads=1 on a shared CPU)
#   python train.py config/prune_synth3.py && python train.py config/prune_synth3.py --prefix_train=0.5
#     (the second: verifiers/hsrm_max_iters-300_eval_interval-25_prefix_train-0.5_seed*)
#   python evaluate.py config/prune_synth3.py && python -m studies.steer config/prune_synth3.py  # the table, pruning
# Thresholds from a separate calibration split (200 fresh problems x 8) instead of the 60 validation problems:
#   python extract.py config/prune_synth3.py --out_dir=out/prune_synth3_calib --train_range=None \
#     --eval_range="(20322,20521)"
#   python label.py config/prune_synth3.py --out_dir=out/prune_synth3_calib
#   python -m studies.steer config/prune_synth3.py --calib_dir=out/prune_synth3_calib/eval
# Measured 2026-11-23 on splits disjoint by question string only (before the operand-multiset split; either operator
# at each position), two 1-thread shards on a shared CPU:
# extract 26 min + calibration 12 min; 15.9% / 13.4% of samples solved (train / eval), pass@8 51.3% / 49.5%.
# HSRM Bo8 17.7 [12.5, 23.2] (majority 16.0, best cheap on val cumulative log-prob 22.5, oracle 49.5).
# Pruning, prefix-trained relative rule: 63.9 +- 9.6% tokens at -0.2 [-2.0, +1.3] pts (validation thresholds),
# 56.1 +- 1.9% at +1.3 [-1.2, +3.8] (calibration split); DeepConf-low / -high 82.8 / 86.6% at 0.0 (RESULTS.md table).
out_dir = 'out/prune_synth3'
model = 'smollm2'
dataset = 'synth'
synth_level = 3
train_range = (0, 299)
eval_range = (20122, 20321)  # level 3 splits by operand multiset: 0-20121 training, 20122- evaluation
n_train_samples = 8
n_eval_samples = 8
max_new_tokens = 96
temperature = 0.8
top_p = 0.95
batch_size = 64
max_iters = 300
eval_interval = 25
seeds = [42, 123, 456]
text_sizes = []         # no text verifier: pruning reads hidden states
deepconf_window = 16    # traces are ~53 tokens: the paper's 2048 would make each one group, never stopped online
deepconf_tail = 32
prune = True            # steer.py runs the pruning study (HSRM pruning and DeepConf online on the same pools)
