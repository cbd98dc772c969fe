"""The envelope builder: Debezium change events from pgoutput messages."""
