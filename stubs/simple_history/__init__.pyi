# django-simple-history ships no types: these stubs declare only what pool_admin uses, so mypy
# checks those calls instead of treating the package as Any. Add a name here when code needs it.
