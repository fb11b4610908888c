"""The event contract: typed event classes (`schemas.events`), their Avro schemas and wire format."""
