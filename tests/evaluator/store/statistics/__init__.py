"""Tests of the store's statistics folder."""
