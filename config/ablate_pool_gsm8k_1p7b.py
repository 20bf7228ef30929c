# Pool-size ablation (paper: Training Data, Figure "Scaling with verifier training-pool size K"), GSM8K x
# Qwen3-1.7B, 5 seeds. Stacks on the paper cell: python train.py config/gsm8k_1p7b.py config/ablate_pool_gsm8k_1p7b.py
# K counts training + validation problems: K problems are drawn from the 500 training problems (a fixed nested
# draw by val_seed), then split 80/20 into train / validation; K = 500 is exactly the headline run's split.
# The paper gives only the ends of its grid (25 and 500); the points between are ours.
max_train_problems = [25, 50, 100, 200, 300, 400, 500]
