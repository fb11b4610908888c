"""Real SMTP relay nodes for the lab: shadow-redundant transport servers that speak SMTP on loopback.

Each node (`node.RelayNode`) accepts mail, stores a shadow copy on a peer of its boundary
(`XSHADOW`) before it answers 250, relays to its next hop, answers and asks the discard
queries (`XQDISCARD`), keeps everything in a local queue database (`queue_db`), publishes
the contract's SMTP-level events to Kafka (`events`) and obeys the twin's redelivery
commands (`commands`). `sink` is the final mailbox, `lab` starts and stops the processes;
`python -m producers.relay node|sink ...` runs one of them.
"""
