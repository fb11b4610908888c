"""shadowtwin: a live digital twin of a shadow-redundant mail-transport topology.

This package holds the command line and the plumbing every part shares: settings, the jar
cache, the embedded Kafka broker and topic creation.
"""
