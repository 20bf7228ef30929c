# config/gsm8k_qwen05_k4000.py's validation draws 43 and 44 (its header has the command): the table's arms but the
# text verifier and the ablations (hours of CPU per draw for what one draw answers).
_k2000 = ['out/gsm8k_qwen05/train', 'out/gsm8k_qwen05_train2/train', 'out/gsm8k_qwen05_vol1/train',
          'out/gsm8k_qwen05_vol2/train']
_k4000 = _k2000 + [f'out/gsm8k_qwen05_vol{i}/train' for i in (3, 4, 5, 6)]
variants = {'hsrm_k2000': {'verifier_layers': [-1], 'train_dirs': _k2000},
            'hsrm_k4000': {'verifier_layers': [-1], 'train_dirs': _k4000},
            'hsrm_mean_k4000': {'verifier_layers': [-1], 'step_read': 'mean', 'train_dirs': _k4000},
            'hsrm_l12_k4000': {'verifier_layers': [12], 'train_dirs': _k4000},
            'hsrm_l12_mean_k4000': {'verifier_layers': [12], 'step_read': 'mean', 'train_dirs': _k4000},
            'stepfeat_only_k4000': {'verifier_layers': [], 'step_features': True, 'train_dirs': _k4000}}
pairs = [('hsrm_k4000', 'hsrm_k2000'), ('hsrm_k4000', 'stepfeat_only_k4000'), ('hsrm_mean_k4000', 'hsrm_k4000'),
         ('hsrm_l12_k4000', 'hsrm_k4000'), ('hsrm_l12_mean_k4000', 'hsrm_k4000')]
