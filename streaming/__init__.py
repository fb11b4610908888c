"""The Spark Structured Streaming side of the twin: session, sources, stateful operators, sinks."""
