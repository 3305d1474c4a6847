"""A prediction's life in the store: the features a tick reads (and the action policy's
inputs), the rule versions a prediction is frozen to, the prediction rows themselves, and the
backfill that decides each window as hit, miss or voided."""
