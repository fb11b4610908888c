"""Everything that writes events to the twin: simulated nodes, recorders, replayers, log adapters."""
