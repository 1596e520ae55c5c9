"""``manage.py doctor``: what an operator checks first, each check bounded in time, one line
each, with what to do about it (docs/OPERATIONS.md, "The doctor").

``checklist.all_checks`` lists them in the order they print: the configuration and the stores
(stores.py), then the processes (processes.py). ``findings.py`` runs them side by side under
one time bound and prints them (text or JSON); it imports no Django, so ``manage.py`` can print
a settings refusal as the doctor's own report.
"""
