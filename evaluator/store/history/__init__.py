"""History brought in from elsewhere: a backtest's own DuckDB file (its marker, runs, bulk
import and queries) and the live service's first-start history import marker."""
