"""What the evaluator does to the world and with its peers: the alert state pushed to
Alertmanager, the Slurm remediation audit, the leader lease and member heartbeats."""
