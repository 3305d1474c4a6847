"""Tests of the store's history folder."""
