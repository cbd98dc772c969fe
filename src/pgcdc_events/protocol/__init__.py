"""pgoutput protocol layer."""
