# Paper cell: OlympiadBench (OE_TO_maths_en_COMP) x Qwen/Qwen3-8B (Qwen3, main results); d_gen = 4096.
# Only what differs from the stage defaults, which are the paper's settings (non-thinking, T=0.7,
# top-p 0.9, 64 samples per training problem and 8 per evaluation problem, float16 on one CUDA GPU,
# final layer, AdamW 1e-4, 1000 steps, 5 seeds). Problems come from the Hugging Face hub unless
# --data_dir=<folder holding olympiadbench/...jsonl> is given.
out_dir = 'out/olympiadbench_8b'
model = 'Qwen/Qwen3-8B'
dataset = 'olympiadbench'
# the paper's split table counts 673 problems, the file 675: we leave out the two rows without a gradable
# final answer (id 1965: prose, id 2349: malformed '$221,$8$'), our reading; file indices are kept
exclude_ids = ['1965', '2349']
train_range = (0, 150)  # = the paper's [0, 149]
eval_range = (151, 674)  # = the paper's [150, 672]
max_new_tokens = 2048
batch_size = 112  # rows per forward on one 80 GB GPU: the most that fit both splits by the memory model (5% headroom)
judge_model = None  # paper-style labels: a local path or hub id of an instruct LLM judge (the paper names none; we
                    # suggest Qwen/Qwen3-8B)
