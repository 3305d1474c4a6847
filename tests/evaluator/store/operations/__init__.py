"""Tests of the store's operations folder."""
