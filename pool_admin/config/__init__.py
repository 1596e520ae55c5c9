"""Operator configuration: upstreams, API clients and keys, worker groups, credentials.

PostgreSQL holds configuration only; proxies live in the Redis activity pool.
"""
