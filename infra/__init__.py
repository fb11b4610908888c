"""Shared plumbing every layer may import: settings, Kafka clients, the embedded broker, the jar cache, topics.

It imports nothing from the command line (`shadowtwin`) nor from the Spark side (`streaming`).
"""
