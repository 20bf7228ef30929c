# Online pruning (issue 13) on a longer synthetic task: SmolLM2-135M-Instruct, level 4 (`Compute 9 + 9 - 8 + 2 - 2.`:
# four operations, so five steps with the answer line), so that a candidate stopped early saves something.
# HSRM with and without prefix training; evaluate.py simulates pruning and DeepConf on the same pools.
# Measured 2026-11-23: SmolLM2-135M solves 7% of level-4 samples (pass@8 ~35%), too few for any verifier to learn
# from 120 training problems (within-AUROC ~0.53); a stronger generator (or a level between 2 and 4) is needed.
#   python train.py config/prune_synth4.py && python train.py config/prune_synth4.py --prefix_train=0.5
out_dir = 'out/prune_synth4'
model = 'smollm2'
dataset = 'synth'
synth_level = 4
train_range = (0, 119)
eval_range = (1000, 1119)
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
deepconf_window = 16    # traces are ~70 tokens: the paper's 2048 would make each one group, never stopped online
deepconf_tail = 32
