# Training-objective ablation (paper appendix, Table "Training-objective ablation"): pointwise BCE instead of the
# tie-safe pairwise loss, 3 seeds. Stacks on a paper cell:
#   python train.py config/gsm8k_1p7b.py config/ablate_loss_bce.py
loss = 'bce'
seeds = [42, 123, 456]
