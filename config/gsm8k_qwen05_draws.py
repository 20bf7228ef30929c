# config/gsm8k_qwen05.py's validation draws 43 and 44 (its header has the command): every arm but the text verifier,
# whose 3 seeds x 3 sizes would cost hours of CPU per draw.
variants = {'hsrm': {'verifier_layers': [-1]}, 'stepfeat_only': {'verifier_layers': [], 'step_features': True},
            'hsrm_mean': {'verifier_layers': [-1], 'step_read': 'mean'}, 'hsrm_l12': {'verifier_layers': [12]},
            'hsrm_l12_mean': {'verifier_layers': [12], 'step_read': 'mean'}}
pairs = [('hsrm', 'stepfeat_only'), ('hsrm_mean', 'hsrm'), ('hsrm_l12', 'hsrm'), ('hsrm_l12_mean', 'hsrm')]  # no text
