# Encoder ablation (paper appendix): DeepSet, d=128 (0.40M at d_gen 2048), 5 seeds from the cell.
# python train.py config/gsm8k_1p7b.py config/ablate_deepset.py
verifier = 'deepset'
