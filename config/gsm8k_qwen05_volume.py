# GSM8K at the paper's training volume (issue 74): does HSRM, with its weighted vote, pick better than voting on a
# real generator once it trains on the paper's 32,000 candidates? Pre-registered: this file, its arms, references,
# choice rule and headline were committed before any of its candidates was sampled.
#
# The pools (training side only; the evaluation candidates, test 500-1318 x 8, are config/gsm8k_qwen05.py's and are
# never re-sampled for this):
#   K = 1,000   test 0-499 (config/gsm8k_qwen05.py) + train.jsonl 0-499 (config/gsm8k_qwen05_train2.py)    8,000 cands
#   K = 2,000   + train.jsonl 500-1,499 (this file, chunks 1-2: vol1, vol2)                              16,000
#   K = 1,000 x 16  the K = 1,000 problems, samples 8-15 added (counter draws leave samples 0-7 as they are) 16,000
#   K = 4,000   + train.jsonl 1,500-3,499 (chunks 3-6: vol3-vol6): the paper's 500 x 64 = 32,000 candidates 32,000
# K counts problems before the 80/20 cut by group (val_seed): K = 2,000 is 1,600 training + 400 validation problems.
# Order of work: K = 2,000 first, then the 16-sample arm, then K = 4,000; each table lands as it comes.
# train.jsonl lines 3,500 and beyond stay out of every extraction and every choice (kept for checks).
# The first two extractions (test 0-499 + 500-1318, train.jsonl 0-499) were made on an Intel AMX Xeon and are not in
# the repository; where they are missing they are re-made first with their own configs' commands, unchanged. On
# another CPU kind or dtype that is another draw: its K = 500 and K = 1,000 tables are reported as a replication
# beside the committed ones (RESULTS), never instead of them, and the growth below stacks on the new draw.
#
# Extraction, resumable chunks of 500, each its own split dir out/gsm8k_qwen05_vol<i> (i = 1..6; so that every dir a
# pooled arm reads holds 500 problems and K counts 500 of each, as the K = 1,000 table pools two; a re-run skips
# finished problems; sampled as the cell: model, prompt, T 0.7, top-p 0.9, 512 tokens, layers [-1, 12], boundary and
# mean reads; its own seed, so no candidate reuses another extraction's draws). Amended before any candidate: one dir
# of 3,000 would have held pools of unequal K per dir.
#   for i in 1 2 3 4 5 6; do lo=$((500 * i)); a="config/gsm8k_qwen05.py config/gsm8k_qwen05_volume.py \
#     --out_dir=out/gsm8k_qwen05_vol$i"; python extract.py $a --train_range="($lo, $((lo + 499)))" && \
#     python label.py $a || break; done
# The 16-sample arm's extraction (samples 8-15 of the K = 1,000 problems) and each K's table config (variants and
# pairs for studies.curve, as config/gsm8k_qwen05_k1000.py) are committed before their own candidates or runs, and
# follow what is fixed here.
#
# Each table (K = 2,000, K = 1,000 x 16, K = 4,000), paired over the same 819 evaluation problems and 3 seeds (42, 123,
# 456), Bo8 and within-AUROC with 95% paired bootstrap intervals:
#   references, each its own paired column: (a) the free selector best on validation, votes included (the project's
#   reference); (b) majority vote; (c) the paper's reference: the single free scorer without votes best on validation
#   by Bo8; (d) the free selector best on the evaluation problems themselves (optimistic, no one could choose it);
#   arms, each also with its weighted vote (temperature chosen on validation): hsrm (the paper's read: final layer,
#   boundary state); the state variant chosen on validation at that K among hsrm_mean, hsrm_l12, hsrm_l12_mean (best
#   validation Bo8 of its kept step, mean over seeds; ties: validation AUROC, then this order); stepfeat_only (the
#   per-step confidence features, no states); the EORM-style text verifier (small) at the largest K only;
#   a free scorer the earlier tables lack: answer agreement (the share of a problem's candidates giving the
#   candidate's answer), in the Bo8 and AUROC columns; oracle pass@8.
#   3 validation draws (val_seed 42, 43, 44) at every K from 2,000 on; the curve (Bo8 and AUROC against training
#   candidates, K = 500 / 1,000 / 2,000 / 4,000, with the 16-sample point) and its plot.
# Ablations on the largest pool (training only), against hsrm, same pairing: the loss (pairwise, bce, listmle); N at
# evaluation (2 / 4 / 8 of the 8 candidates); the encoder body (post-LN, the paper's, against pre-LN: norm_first).
#
# Headline, in this order, at K = 4,000 unless said (a difference is 'beyond' where its interval excludes 0, else 'not
# distinguishable'):
#   1. HSRM + weighted vote - (a); HSRM - (a); AUROC: HSRM - the free scorer best on validation by AUROC
#   2. HSRM + weighted vote - (b) majority vote
#   3. HSRM - (c) the paper's reference (the paper's own comparison)
#   4. HSRM at K = 4,000 - at K = 2,000 (Bo8, AUROC): still rising?
#   5. problems against samples at 16,000 candidates: HSRM at K = 2,000 x 8 - HSRM at K = 1,000 x 16
#   6. HSRM - stepfeat_only; HSRM - text
#   7. the chosen variant - (a)
out_dir = 'out/gsm8k_qwen05_vol1'  # chunk 1; chunk i: --out_dir=out/gsm8k_qwen05_vol<i> (the commands above)
dataset = 'gsm8k'  # as config/gsm8k_qwen05.py (said again so this file read alone is a GSM8K config)
data_path = '../shared/data/gsm8k/train.jsonl'  # this workplace's copy; elsewhere <folder>/gsm8k/train.jsonl
train_range = (500, 999)  # chunk 1; chunk i: (500 i, 500 i + 499)
eval_range = None
seed = 1339
