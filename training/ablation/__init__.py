"""The comparison of Tables 5 and 1 in miniature (`training.ablations`): its settings,
runs, tasks, tables, statistics, scaling stages and calibration."""
