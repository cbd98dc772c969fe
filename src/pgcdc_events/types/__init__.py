"""PostgreSQL types as Kafka Connect schemas and values."""
