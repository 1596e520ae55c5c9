"""``ApiView``: what every view of the client API does before its handler runs.

Each authenticated call takes one unit of its client's requests-per-second limit, right after
its key is checked and before anything else, whether the call then succeeds or fails (over the
limit it is a 429 ``rate_limited``); a 406 of content negotiation and a 401 come first and take
nothing. The extract is the exception: the pool counts its call in the same atomic step as the
extract (ratelimit.py), so ExtractView charges none here. Each call also gets its request ID
here, which its error answers name (problems.py) and its usage event carries.
"""

from __future__ import annotations

import uuid

from rest_framework.request import Request
from rest_framework.views import APIView

from pool_admin.api.auth import Principal
from pool_admin.api.ratelimit import charge_call


class ApiView(APIView):
    #: False for a view whose calls the pool counts itself (the extract).
    charges_request_unit = True

    def perform_authentication(self, request: Request) -> None:
        request.request_id = uuid.uuid4().hex  # type: ignore[attr-defined]
        principal = request.user  # authenticates (401 when the key is bad)
        if self.charges_request_unit and isinstance(principal, Principal):
            charge_call(principal)
