"""Test support: hypothesis strategies, factories and a throwaway PostgreSQL cluster."""
