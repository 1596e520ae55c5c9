"""The client REST API (``/api/v1/``): extract and inventory, API-key auth, problem+json."""
