"""Using a sweep elsewhere: the transferred hyperparameters for a target shape
(:mod:`.hparams`) and the sweep as Optuna studies (:mod:`.optuna`)."""
