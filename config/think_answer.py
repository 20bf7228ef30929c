# Thinking-mode ablation, answer-only: the extraction of config/think_full.py (the same three extraction keys, so
# either file resumes it), HSRM reading only the step states after </think> (a trace cut off before </think>
# reads its final state). Run with think_full.py into the same out_dir (command there).
enable_thinking = True
max_new_tokens = 8192
max_steps = None
input_steps = 'answer'
batch_size = 64  # on math500_1p7b at 8192 new tokens: the most rows per forward that fit one 80 GB GPU by the memory
                 # model
