"""The console's proxy pages: the pool a bounded page at a time (``PoolInspector.browse``), and
one proxy whole (``proxy_detail``), read through the pool's port only.

The filters come from the page's query string and are checked here before the pool is asked:
a value the pool would refuse is shown back as the form's error, with a 400, and nothing read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django import forms
from django.http import QueryDict

from activity.errors import ActivityError, InvalidRequest
from activity.inspection import BrowseCursor, BrowsePage, BrowseQuery, ProxyDetail
from activity.types import ProxyState
from pool_admin.bootstrap import get_pool
from pool_admin.config.models import PROTOCOL_CHOICES, Upstream
from pool_admin.config.models.base import validate_vendor_label

PAGE_SIZE = 50
#: Index entries one page reads at most: a page's cost stays flat whatever the pool's size.
BROWSE_BUDGET = 2_000
_STATES = [("", "any")] + [(s.value, s.value) for s in ProxyState if s not in (ProxyState.EXPIRED,)]


class ProxyFilters(forms.Form):
    upstream = forms.ChoiceField(required=False)
    state = forms.ChoiceField(required=False, choices=_STATES)
    protocol = forms.ChoiceField(required=False, choices=[("", "any"), *PROTOCOL_CHOICES])
    region = forms.CharField(required=False, max_length=64, validators=[validate_vendor_label])
    carrier = forms.CharField(required=False, max_length=64, validators=[validate_vendor_label])
    after = forms.CharField(required=False, widget=forms.HiddenInput, max_length=300)

    def __init__(self, data: QueryDict) -> None:
        super().__init__(data)
        self.query_data = data
        names = Upstream.objects.order_by("name").values_list("name", flat=True)[:1_000]
        upstream = self.fields["upstream"]
        assert isinstance(upstream, forms.ChoiceField)
        upstream.choices = [("", "any"), *((n, n) for n in names)]

    def clean_after(self) -> BrowseCursor | None:
        token = self.cleaned_data.get("after")
        if not token:
            return None
        try:
            return BrowseCursor.parse(token)
        except InvalidRequest:
            raise forms.ValidationError(
                "This page link is not valid; start from the first page."
            ) from None

    def query(self) -> BrowseQuery:
        c = self.cleaned_data
        return BrowseQuery(
            upstream=c["upstream"] or None,
            state=ProxyState(c["state"]) if c["state"] else None,
            protocol=c["protocol"] or None,
            region=c["region"] or None,
            carrier=c["carrier"] or None,
            after=c["after"],
            limit=PAGE_SIZE,
            budget=BROWSE_BUDGET,
        )

    def without_cursor(self) -> str:
        """This query string, from its first page."""
        data = self.query_data.copy()
        data.pop("after", None)
        data.pop("part", None)
        return data.urlencode()


@dataclass
class ProxiesPage:
    filters: ProxyFilters
    page: BrowsePage | None = None
    #: Why nothing was read: the pool's code, when the pool could not answer now.
    unavailable: str = ""
    links: dict[str, str] = field(default_factory=dict)


def proxies_page(data: QueryDict) -> ProxiesPage:
    filters = ProxyFilters(data)
    result = ProxiesPage(filters)
    if not filters.is_valid():
        return result
    try:
        result.page = get_pool().browse(filters.query())
    except ActivityError as exc:
        result.unavailable = exc.code
        return result
    base = filters.without_cursor()
    result.links["first"] = f"?{base}"
    if result.page.next is not None:
        nxt = filters.query_data.copy()
        nxt.pop("part", None)
        nxt["after"] = result.page.next.token()
        result.links["next"] = f"?{nxt.urlencode()}"
    return result


def proxy_detail(proxy_id: str) -> tuple[ProxyDetail | None, str]:
    """The proxy, or None; and why it could not be read ("" when it could)."""
    try:
        return get_pool().proxy_detail(proxy_id), ""
    except InvalidRequest:
        return None, "not a proxy ID"
    except ActivityError as exc:
        return None, exc.code
