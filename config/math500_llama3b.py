# Paper cell: MATH-500 x meta-llama/Llama-3.2-3B-Instruct (cross-family); d_gen = 3072.
# Only what differs from the stage defaults, which are the paper's settings (non-thinking, T=0.7,
# top-p 0.9, 64 samples per training problem and 8 per evaluation problem, float16 on one CUDA GPU,
# final layer, AdamW 1e-4, 1000 steps, 5 seeds). Problems come from the Hugging Face hub unless
# --data_dir=<folder holding math500/...jsonl> is given.
out_dir = 'out/math500_llama3b'
model = 'meta-llama/Llama-3.2-3B-Instruct'
dataset = 'math500'
train_range = (0, 149)  # the paper's split table
eval_range = (150, 499)
max_new_tokens = 2048
batch_size = 184  # rows per forward on one 80 GB GPU: the most that fit both splits by the memory model (5% headroom)
judge_model = None  # paper-style labels: a local path or hub id of an instruct LLM judge (the paper names none; we
                    # suggest Qwen/Qwen3-8B)
