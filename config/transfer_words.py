# Leave-one-family-out transfer (issue 20) over config/words.py's four word-problem families, each extracted once
# (48-64 problems x 8) and reused by every fold:
#   for f in shop travel bake share; do python extract.py config/words.py --word_family=$f --out_dir=out/words_$f
#                                       python label.py config/words.py --out_dir=out/words_$f; done
#   python transfer.py config/transfer_words.py
out_dir = 'out/transfer_words'
families = {'shop': 'out/words_shop', 'travel': 'out/words_travel', 'bake': 'out/words_bake', 'share': 'out/words_share'}
variants = {
    'hsrm': {},                                              # hidden states alone (the paper's verifier)
    'hsrm_conf': {'step_features': True},                    # + each step's log-prob, entropy, DeepConf confidence
    'hsrm_residual': {'residual': 'auto', 'step_features': True},  # the best free scorer on validation + a correction
    'hsrm_combo': {'residual': 'combo', 'step_features': True},    # every free scorer, weights learned on the training
                                                                   # families (train.combo_fit) + a correction
}
in_domain = ['hsrm', 'hsrm_residual']  # also trained on the held-out family itself: the in-domain reference
seeds = [42, 123, 456]
train_overrides = {'max_iters': 200, 'eval_interval': 25}
