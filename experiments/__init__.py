"""One module per reproduced claim family; see ``dedebate/lab/experiment.py`` for the contract."""
