# Where the error signal lives on word problems (issue 55), the second family: travel, as config/layers_shop.py
# (grouped by its numbers alone, stacked on config/curve_shop.py, the same layers, step kinds and arms). Every
# training question below travel's numbers boundary, 0-857 x 8 (K = 858, about 686 train after the 80/20 grouped
# cut: the family has no more), and the first 300 of its evaluation part, 858-1157 x 8.
#   python extract.py config/curve_shop.py config/layers_travel.py
#   python label.py config/curve_shop.py config/layers_travel.py
#   python -m studies.curve config/curve_shop.py config/layers_travel.py --threads=1
# two more validation draws on the same extraction:
#   for v in 43 44; do mkdir -p out/layers_travel_v$v && ln -sfn $PWD/out/layers_travel/train \
#     out/layers_travel_v$v/train && ln -sfn $PWD/out/layers_travel/eval out/layers_travel_v$v/eval \
#     && python -m studies.curve config/curve_shop.py config/layers_travel.py --out_dir=out/layers_travel_v$v \
#     --val_seed=$v --threads=1; done
out_dir = 'out/layers_travel'
dataset = 'words'
word_family = 'travel'
word_split = 'numbers'
train_range = (0, 857)
eval_range = (858, 1157)
layers = [8, 15, 23, -1]
step_kinds = ['boundary', 'mean']
sizes = [858]
variants = {'hsrm': {'verifier_layers': [-1]},  # the paper's read
            'stepfeat_only': {'verifier_layers': [], 'step_features': True},  # the reference: no states
            'l8_feat': {'verifier_layers': [8], 'step_read': 'mean', 'step_features': True},
            'l15_feat': {'verifier_layers': [15], 'step_read': 'mean', 'step_features': True},
            'l23_feat': {'verifier_layers': [23], 'step_read': 'mean', 'step_features': True},
            'last_feat': {'verifier_layers': [-1], 'step_read': 'mean', 'step_features': True},
            'all4_feat': {'verifier_layers': [8, 15, 23, -1], 'step_read': 'mean', 'step_features': True}}
pairs = [(v, 'stepfeat_only') for v in ('hsrm', 'l8_feat', 'l15_feat', 'l23_feat', 'last_feat', 'all4_feat')]
