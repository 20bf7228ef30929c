# Thinking-mode ablation (paper: Table "Thinking-mode extraction ablation"), full trace: thinking on, every step
# boundary of the trace stored (max_steps=None) together with where </think> ends, and HSRM reading all of them.
# config/think_answer.py trains on the same extraction reading only the steps after </think>, so both rows
# rank the same candidates; one out_dir holds both runs (hsrm_seed*, hsrm_input_steps-answer_seed*):
#   for c in think_full think_answer; do for s in extract label train evaluate; do
#     python $s.py config/math500_1p7b.py config/$c.py --out_dir=out/math500_1p7b_think; done; done
# (the second pass finds every problem extracted, relabels the same candidates, trains the answer-only runs and
# evaluates both in one table; --max_steps=100 on train.py gives the last-100 reading of the same traces). The paper
# gives no generation limit for thinking traces: ours is 8192 new tokens (a trace cut there keeps finish='length'
# and is labelled like any other; with no </think> its answer-only input is its final state).
enable_thinking = True
max_new_tokens = 8192
max_steps = None
batch_size = 64  # on math500_1p7b at 8192 new tokens: the most rows per forward that fit one 80 GB GPU by the memory
                 # model
