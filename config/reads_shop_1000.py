# Where a step is read on shop at 1,000 training problems (issue 44 item 2 at its stated size): train 0-999 x 8
# (K = 1,000, about 800 train after the 80/20 grouped cut), scored on config/reads_shop.py's evaluation split
# (1250-1499 x 8, the same candidates; curve.py reports apart the questions whose numbers a training question uses in
# another arrangement). Stacked on config/curve_shop.py and config/reads_shop.py: the same sampling, step kinds and
# split; config/reads_travel_858.py's four arms.
# Indices 0-479 are config/reads_shop.py's own training problems: an extraction is seeded per batch, so extending a
# copy of out/reads_shop (run 2026-11-26 as `cp -al out/reads_shop/{train,eval} out/reads_shop_1000/`, then the
# commands below) samples exactly what a fresh run into an empty dir would.
#   python extract.py config/curve_shop.py config/reads_shop.py config/reads_shop_1000.py
#   python label.py config/curve_shop.py config/reads_shop.py config/reads_shop_1000.py
#   python -m studies.curve config/curve_shop.py config/reads_shop.py config/reads_shop_1000.py --threads=1
# two more validation draws on the same extraction:
#   for v in 43 44; do mkdir -p out/reads_shop_1000_v$v && ln -sfn $PWD/out/reads_shop_1000/train \
#     out/reads_shop_1000_v$v/train && ln -sfn $PWD/out/reads_shop_1000/eval out/reads_shop_1000_v$v/eval \
#     && python -m studies.curve config/curve_shop.py config/reads_shop.py config/reads_shop_1000.py \
#     --out_dir=out/reads_shop_1000_v$v --val_seed=$v --threads=1; done
out_dir = 'out/reads_shop_1000'
train_range = (0, 999)
sizes = [1000]
variants = {'hsrm': {}, 'hsrm_mean': {'step_read': 'mean'},
            'mean_stepfeat': {'step_read': 'mean', 'step_features': True},  # the best read of K = 480 with the features
            'stepfeat_only': {'verifier_layers': [], 'step_features': True}}  # the control: the features, no states
pairs = [('hsrm_mean', 'hsrm'), ('mean_stepfeat', 'hsrm'), ('mean_stepfeat', 'hsrm_mean'),
         ('mean_stepfeat', 'stepfeat_only')]
