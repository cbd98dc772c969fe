"""Helpers shared by the test suites (live-server capture, fixtures)."""
