# Paper cell: aime x Qwen/Qwen3-1.7B (Qwen3, main results). Splits, sampling and training settings from the paper's
# appendix (float16, T=0.7, top-p 0.9, non-thinking, 64 samples per training problem, 8 per
# evaluation problem, AdamW 1e-4, 1000 steps, 5 seeds). One CUDA GPU; d_gen = 2048.
out_dir = 'out/aime_1p7b'
model = 'Qwen/Qwen3-1.7B'
dataset = 'aime'
train_range = (0, 19)
eval_range = (20, 89)
n_train_samples = 64
n_eval_samples = 8
temperature = 0.7
top_p = 0.9
max_new_tokens = 4096
enable_thinking = False
device = 'cuda'
dtype = 'float16'
batch_size = 48
seeds = [42, 123, 456, 789, 1024]
