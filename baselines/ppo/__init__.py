"""PPO baseline: ``train.py`` (the algorithm, top to bottom), ``networks.py`` (observation
preprocessing, networks per observation kind, checkpoints) and ``agent.py`` (the submission-format
agent that loads a checkpoint per task and run). See README.md in this folder.
"""
