# Paper cell: GSM8K x Qwen/Qwen3-8B (Qwen3, main results); d_gen = 4096.
# Only what differs from the stage defaults, which are the paper's settings (non-thinking, T=0.7,
# top-p 0.9, 64 samples per training problem and 8 per evaluation problem, float16 on one CUDA GPU,
# final layer, AdamW 1e-4, 1000 steps, 5 seeds). Problems come from the Hugging Face hub unless
# --data_dir=<folder holding gsm8k/...jsonl> is given.
out_dir = 'out/gsm8k_8b'
model = 'Qwen/Qwen3-8B'
dataset = 'gsm8k'
train_range = (0, 499)  # the paper's split table
eval_range = (500, 1318)
max_new_tokens = 1024
batch_size = 256  # rows per forward on one 80 GB GPU: the most that fit both splits by the memory model (5% headroom)
judge_model = None  # paper-style labels: a local path or hub id of an instruct LLM judge (the paper names none; we
                    # suggest Qwen/Qwen3-8B)
