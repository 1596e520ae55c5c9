-- drop_account.lua: everything the scheduler holds for one account (its provider account was
-- deleted): cadence, requests, running leases (their claims are lost) and the call log.
-- KEYS[1]  <prefix>:{sched}:meta
-- ARGV[1]  account digest
-- Returns: {"ok": true}
-- Errors: none
assert(#ARGV == 1, 'drop_account: arity')
redis.call('DEL', k('cadence'), k('priority'), k('running'), k('claims'), k('requests'),
           k('pending'), k('calls'), k('seq'), k('proxies'), k('pseq'))
return ok(true)
