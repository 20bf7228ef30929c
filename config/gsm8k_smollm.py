# Real GSM8K problems with the embedded generator (SmolLM2-135M-Instruct): a small subset, since the
# model is weak (a few percent per sample) and CPU sampling of ~200-token solutions is slow. It shows the
# pipeline end to end on real data; the numbers are not a paper comparison.
out_dir = 'out/gsm8k_smollm'
model = 'smollm2'
dataset = 'gsm8k'
data_dir = '../shared/data'  # this workplace's copy of the benchmark files (run from the repo root)
train_range = (0, 15)
eval_range = (500, 515)
n_train_samples = 8
n_eval_samples = 8
max_new_tokens = 256
temperature = 0.7
top_p = 0.9
batch_size = 64
system_prompt = 'Solve the problem step by step. End with "The answer is N."'
max_iters = 300
seeds = [42, 123, 456]
