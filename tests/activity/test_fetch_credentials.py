"""FetchCredentials: fetched passwords held in memory while their batch is written, in front of
the account-wide store, bounded."""

from __future__ import annotations

import pytest

from activity.credentials import (
    CredentialUnavailable,
    FetchCredentials,
    SecretRef,
    StaticCredentials,
)


def test_fetched_references_resolve_here_and_others_in_the_fallback():
    account_wide = StaticCredentials()
    shared = account_wide.put("acct", "account-pw").ref
    store = FetchCredentials(account_wide)
    fetched = store.put("u1", "p1").ref
    assert fetched.ref.startswith("fetch:") and "p1" not in repr(fetched)
    assert (store.resolve(fetched).username, store.resolve(fetched).password) == ("u1", "p1")
    assert store.resolve(shared).password == "account-pw"
    store.discard([fetched])
    with pytest.raises(CredentialUnavailable):
        store.resolve(fetched)
    with pytest.raises(CredentialUnavailable):
        store.resolve(SecretRef("fetch:999"))
    assert store.held() == 0


def test_it_holds_at_most_its_bound():
    store = FetchCredentials(StaticCredentials(), max_items=2)
    refs = [store.put("u", "p").ref, store.put("u", "p").ref]
    with pytest.raises(OverflowError):
        store.put("u", "p")
    store.discard(refs[:1])
    store.put("u", "p")
    assert store.held() == 2
