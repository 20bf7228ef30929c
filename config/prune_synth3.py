# Online pruning (issue 13) on a 4-step synthetic level: SmolLM2-135M-Instruct, level 3 (`Compute 7 + 8 - 8 + 9.`:
# "Step 1..3" lines and "The answer is" line = 4 steps), between level 2 (3 steps) and level 4 (7% solved).
# HSRM with and without prefix training; evaluate.py simulates pruning and DeepConf on the same pools.
#   for s in extract label; do python $s.py config/prune_synth3.py; done   (extract with --threads=1 on a shared CPU)
#   python train.py config/prune_synth3.py && python train.py config/prune_synth3.py --prefix_train=0.5  # -> verifiers/hsrm_prefix_train-0.5_seed*
#   python evaluate.py config/prune_synth3.py
# Measured 2026-11-23 (one core of a shared 2-core CPU, --threads=1): a 16-problem pilot solved 18.8% of samples (pass@8 50%);
# the full run solves 20.1% of samples on both splits (pass@8 47.7% train / 45.0% eval; 43% of problems mixed), candidates
# ~53 tokens, 4.0 steps. Wall: extract 2583 s (train 300x8 in 1666 s at ~75 tok/s, eval 200x8 in 904 s at ~92 tok/s),
# label 7 s, train 96 s (plain) + 106 s (prefix), evaluate 72 s.
# Result: HSRM Bo8 25.2 +- 1.4 (majority 24.9, best cheap on val mean log-prob 29.0, oracle 45.0). Pruning, relative
# rule: 73.7 +- 7.3% tokens at -0.67 +- 4.19 pts (plain), 76.2 +- 8.7% at +0.17 +- 0.58 (prefix training); global rule
# loses 5-8 pts; DeepConf-low / -high 91.9 / 93.6% tokens at +0.00. 60 validation problems (1.7 pts each) are coarse
# for a 1-pt tolerance: thresholds chosen there transfer unevenly across seeds.
# With a separate calibration split (200 fresh problems x 8, 23.1% solved; extraction 10 min as two 1-thread shards):
#   python extract.py config/prune_synth3.py --out_dir=out/prune_synth3_calib --train_range=None --eval_range="(1200,1399)"
#   python label.py config/prune_synth3.py --out_dir=out/prune_synth3_calib
#   python evaluate.py config/prune_synth3.py --calib_dir=out/prune_synth3_calib/eval
# relative rule 69.2 +- 5.1% tokens at -1.67 +- 4.01 (plain), 66.3 +- 0.1% at -1.50 +- 1.80 (prefix training); global rule
# 78.5 +- 4.5% at +0.33 +- 0.76 (plain), 77.0 +- 13.1% at -1.33 +- 1.53 (prefix); DeepConf global 87.0% at -1.0.
# Level 4 (`--synth_level=4 --out_dir=out/prune_synth4`, 120 + 120 problems x 8, 2026-11-23): SmolLM2 solves 7%
# (pass@8 ~35%), too few for any verifier to learn (within-AUROC ~0.53): uninformative.
out_dir = 'out/prune_synth3'
model = 'smollm2'
dataset = 'synth'
synth_level = 3
train_range = (0, 299)
eval_range = (1000, 1199)
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
prune = True            # evaluate.py simulates HSRM pruning and DeepConf online on the same pools
