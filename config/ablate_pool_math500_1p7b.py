# Pool-size ablation, MATH-500 x Qwen3-1.7B, 5 seeds (see ablate_pool_gsm8k_1p7b.py for how validation is drawn).
# python train.py config/math500_1p7b.py config/ablate_pool_math500_1p7b.py
# The paper gives only the ends of its grid (10 and 125, of 150 training problems); the points between are ours.
max_train_problems = [10, 25, 50, 75, 100, 125]
