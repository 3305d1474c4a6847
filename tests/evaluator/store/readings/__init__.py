"""Tests of the store's readings folder."""
