"""The shadow-redundancy model: plain Python, no engine imports.

Spark, the offline replay and the tests all drive the same transition functions here.
"""
