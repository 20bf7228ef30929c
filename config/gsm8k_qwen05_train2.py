# The K = 1,000 extension that config/gsm8k_qwen05.py's rule asks for: HSRM's AUROC rose from K = 250 to 500 beyond
# its interval (2026-11-28, RESULTS). 500 more training problems, GSM8K train.jsonl 0-499 x 8, sampled as the
# first extraction was (this file stacks on it: model, prompt, T 0.7, top-p 0.9, 512 tokens, layers, step kinds);
# training only, so the evaluation set stays test 500-1318. Committed before any of its candidates was sampled.
# Its rows are groups 'gsm8k:train-<line>' (tasks.load_problems), never a test problem's. Another seed, so that no
# candidate reuses the draws of the test problem on the same line. Resumable chunks:
#   python extract.py config/gsm8k_qwen05.py config/gsm8k_qwen05_train2.py --train_range="(0, 249)"   # chunk 1
#   python extract.py config/gsm8k_qwen05.py config/gsm8k_qwen05_train2.py                            # chunk 2
#   python label.py config/gsm8k_qwen05.py config/gsm8k_qwen05_train2.py
# The K = 1,000 training (the two train splits pooled) and its table are fixed in a later commit, before any of them
# is run, and reported beside the K = 500 table, never instead of it.
out_dir = 'out/gsm8k_qwen05_train2'
data_path = '../shared/data/gsm8k/train.jsonl'
train_range = (0, 499)
eval_range = None
seed = 1338
