from collections.abc import Sequence
from typing import Any

class HistoricalRecords:
    def __init__(
        self,
        *,
        excluded_fields: Sequence[str] | None = ...,
        m2m_fields: Sequence[str] = ...,
        **options: Any,
    ) -> None: ...
