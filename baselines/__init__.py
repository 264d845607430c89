"""Reference agents for polar_bench: ``baselines.random`` (results only) and ``baselines.ppo``.

Each baseline is a submission-format agent (``baselines/<name>/agent.py``) plus the code and the
commands that trained it; see each folder's README.
"""
