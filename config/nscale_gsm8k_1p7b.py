# N-scaling (paper appendix, Table "N-scaling"): the same verifiers on 64 samples per evaluation problem,
# best-of-N at N = 8, 16, 32, 64 (random N-subsets of the 64). Stacks on the paper cell; only the eval split is
# sampled again, into its own out_dir, and the cell's checkpoints are scored:
#   python extract.py config/gsm8k_1p7b.py config/nscale_gsm8k_1p7b.py   (then label.py, evaluate.py, same configs)
out_dir = 'out/gsm8k_1p7b_n64'
train_range = None
n_eval_samples = 64
ckpts = ['out/gsm8k_1p7b/verifiers/*/ckpt.pt']
train_dir = 'out/gsm8k_1p7b/train'
n_scaling = [8, 16, 32, 64]
