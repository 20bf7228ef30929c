"""
The studies: experiments and measurements on top of the pipeline, each a module run from the repo's root,

    python -m studies.curve config/curve_synth2.py

They import the pipeline's files (the top level); nothing at the top level imports them. Their tests:
studies/test_studies.py. bench.py backs the speed and memory numbers of README.md and RESULTS.md; bench_lab.py
keeps the measurements that back none.
"""
