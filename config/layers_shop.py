# Where the error signal lives on word problems (issue 55): which layer's states add to the step-confidence features?
# shop grouped by its numbers alone (word_split='numbers': no evaluation question shares its numbers with a training
# one in any arrangement), stacked on config/curve_shop.py (its sampling and training: 8 samples, 128 new tokens,
# T 0.8, top-p 0.95, 20 epochs, 3 seeds). Every training question below shop's numbers boundary, 0-1158 x 8 (K =
# 1,159, about 927 train after the 80/20 grouped cut), and the first 300 of its evaluation part, 1159-1458 x 8. The
# states at about a quarter, half and three quarters of SmolLM2's 30 layers and the last (hidden_states 8, 15, 23,
# -1), each step read at its boundary and as its tokens' mean. Arms: each layer's mean read with the step features,
# the four together with them, the paper's read (last layer, boundary, no features), and the reference a state read
# must beat: the step features alone (stepfeat_only, a verifier that reads no states).
#   python extract.py config/curve_shop.py config/layers_shop.py
#   python label.py config/curve_shop.py config/layers_shop.py
#   python -m studies.curve config/curve_shop.py config/layers_shop.py --threads=1
# two more validation draws on the same extraction (val_seed draws the validation cut; the candidates are shared):
#   for v in 43 44; do mkdir -p out/layers_shop_v$v && ln -sfn $PWD/out/layers_shop/train out/layers_shop_v$v/train \
#     && ln -sfn $PWD/out/layers_shop/eval out/layers_shop_v$v/eval && python -m studies.curve config/curve_shop.py \
#     config/layers_shop.py --out_dir=out/layers_shop_v$v --val_seed=$v --threads=1; done
out_dir = 'out/layers_shop'
dataset = 'words'
word_family = 'shop'
word_split = 'numbers'
train_range = (0, 1158)
eval_range = (1159, 1458)
layers = [8, 15, 23, -1]
step_kinds = ['boundary', 'mean']
sizes = [1159]
variants = {'hsrm': {'verifier_layers': [-1]},  # the paper's read
            'stepfeat_only': {'verifier_layers': [], 'step_features': True},  # the reference: no states
            'l8_feat': {'verifier_layers': [8], 'step_read': 'mean', 'step_features': True},
            'l15_feat': {'verifier_layers': [15], 'step_read': 'mean', 'step_features': True},
            'l23_feat': {'verifier_layers': [23], 'step_read': 'mean', 'step_features': True},
            'last_feat': {'verifier_layers': [-1], 'step_read': 'mean', 'step_features': True},
            'all4_feat': {'verifier_layers': [8, 15, 23, -1], 'step_read': 'mean', 'step_features': True}}
pairs = [(v, 'stepfeat_only') for v in ('hsrm', 'l8_feat', 'l15_feat', 'l23_feat', 'last_feat', 'all4_feat')]
