"""Steps of the shell recipes (recipes/*.sh) that no other command does: picking the pretraining checkpoint,
a randomly initialised baseline, and the run's report. Run as ``python -m biofairseq.recipe.<step>``."""
