# Thinking-mode ablation (paper: Table "Thinking-mode extraction ablation"), MATH-500 x Qwen/Qwen3-4B, thinking on,
# 'full' extraction (step states over the whole trace, thinking included). The
# non-thinking reference row is the paper cell math500_4b.py. Same splits and sampling as that cell; the
# paper does not give a generation limit for thinking traces: ours is 8192 new tokens (a trace cut there is
# kept, with finish='length', and labelled like any other).
out_dir = 'out/math500_4b_think_full'
model = 'Qwen/Qwen3-4B'
dataset = 'math500'
train_range = (0, 149)
eval_range = (150, 499)
max_new_tokens = 8192
enable_thinking = True
think_extract = 'full'
batch_size = 64
