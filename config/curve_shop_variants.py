# What a researcher would try when plain HSRM does not beat the free scorers on shop (issue 37): every variant at the
# curve's largest size (K = 1250: 1,000 training problems), 3 seeds, against the same references as the curve, and
# the one chosen on validation. Reads config/curve_shop.py's extraction and reuses its runs (the same run dirs):
#   mkdir -p out/curve_shop_variants && for d in train eval curve; do ln -sfn $PWD/out/curve_shop/$d \
#     out/curve_shop_variants/$d; done
#   python -m studies.curve config/curve_shop.py config/curve_shop_variants.py --threads=1
out_dir = 'out/curve_shop_variants'
sizes = [1250]
variants = {'hsrm': {'verifier_layers': [-1]},
            'residual': {'residual': 'auto', 'verifier_layers': [-1]},           # the best free scorer on val + states
            'hsrm_steps1000': {'verifier_layers': [-1], 'epochs': None, 'max_iters': 1000},
            'residual_combo': {'residual': 'combo', 'verifier_layers': [-1]},    # the fitted free-scorer combo + states
            'hsrm_d128': {'verifier': 'hsrm_narrow', 'verifier_layers': [-1]},   # a smaller encoder
            'hsrm_reg': {'verifier_layers': [-1], 'dropout': 0.3, 'weight_decay': 0.1},  # a more regularised one
            'hsrm_prefix': {'verifier_layers': [-1], 'prefix_train': 0.5},       # prefix training
            'hsrm_listmle': {'verifier_layers': [-1], 'loss': 'listmle'},        # a listwise loss for the top pick
            'hsrm_top4': {'verifier_layers': [-1, -2, -3, -4]},                  # the top-4 layers
            'hsrm_stepfeat': {'verifier_layers': [-1], 'step_features': True},   # each step's log-prob, entropy,
                                                                                 # confidence
            'residual_stepfeat': {'residual': 'auto', 'verifier_layers': [-1], 'step_features': True},
            'stepfeat_only': {'verifier_layers': [], 'step_features': True}}    # the control: step features, no states
pairs = [('hsrm_stepfeat', 'stepfeat_only'),  # what the states add beyond the step features, paired
         ('hsrm_stepfeat', 'hsrm')]           # what the step features add to the states
