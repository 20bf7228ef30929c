# Input-modality ablation: the top-4 layers concatenated (input 4 x d_gen; 3.69M at d_gen 2048). Needs an
# extraction that stored them: python train.py config/gsm8k_1p7b_layers.py config/ablate_top4.py
verifier_layers = [-1, -2, -3, -4]
