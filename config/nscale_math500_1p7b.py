# N-scaling on MATH-500 x Qwen3-1.7B (see nscale_gsm8k_1p7b.py):
#   python extract.py config/math500_1p7b.py config/nscale_math500_1p7b.py   (then label.py, evaluate.py, same configs)
out_dir = 'out/math500_1p7b_n64'
train_range = None
n_eval_samples = 64
ckpts = ['out/math500_1p7b/verifiers/*/ckpt.pt']
train_dir = 'out/math500_1p7b/train'
n_scaling = [8, 16, 32, 64]
