"""Usage metrics (issue 13): typed events through a Redis Stream into PostgreSQL aggregates,
exactly once (after seed 003, with its flaw fixed: an entry is acknowledged only after the
transaction that applied it commits, and the IDs it applied are recorded in that transaction).

``events`` is the events' one shape (encode, decode, validate); ``stream`` the producers' one
function; ``consumer`` the group consumer, ``aggregates`` what it writes. What it records of
the entries applied is ``config.AppliedEntry`` (the aggregates are config's models too).
"""
