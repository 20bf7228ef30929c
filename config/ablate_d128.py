# Encoder ablation (paper appendix): the Transformer at d=128 (0.67M at d_gen 2048), 5 seeds from the cell.
# python train.py config/gsm8k_1p7b.py config/ablate_d128.py
verifier = 'hsrm_narrow'
