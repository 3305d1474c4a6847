"""Tests of the store's predictions folder."""
