"""What users read: the prediction statistics (set-based, never one query per card), the facts
they take from the samples alone, and the read-only queries behind the HTTP API."""
