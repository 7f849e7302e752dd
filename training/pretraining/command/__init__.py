"""`python -m training.pretrain`'s run, above the families' recipes: it
picks the family's recipe (`recipes.make_recipe`), writes or finds the data
through the recipe's hooks (`recipes.prepare_data`), fits
(`loop.train`), evaluates and exports (`runner.run`). The recipes and what
they share (`training/pretraining/`) sit below it: they never call back up
into the run."""
