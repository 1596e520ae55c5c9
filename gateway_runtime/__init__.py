"""The gateway worker runtime.

A separate process that opens a session with the control plane, fetches, verifies and ACKs its
snapshot, serves clients as an HTTP forward proxy from that local snapshot and local capacity
counters, and reports runtime counts. It imports neither Django nor Redis: the request path
never touches the activity pool.
"""
