# Input-modality ablation, "Last hidden state": the final step's state only. Stacks on a paper cell (or on
# gsm8k_1p7b_layers.py with ablate_top4.py for the top-4-layer row):
#   python train.py config/gsm8k_1p7b.py config/ablate_last_step.py
input_steps = 'last'
