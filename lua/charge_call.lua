-- charge_call.lua: one call unit of a client's CallQuota, for a call refused before the pool
-- was asked (a malformed request still counts). activity/_quota.py: the arithmetic.
-- KEYS[1]  <prefix>:{activity}:meta
-- ARGV[1]  now (caller clock, ms)   ARGV[2] client ID
-- ARGV[3]  quota JSON {calls, call_window, proxies, proxy_window} (windows in ms)
-- Returns: {"ok": true}
-- Errors: quota_exceeded (reason calls) {retry_after_ms, left}: nothing taken
assert(#KEYS == 1 and #ARGV == 3, 'charge_call: arity')
local refused = quota_take(ARGV[2], cjson.decode(ARGV[3]), 'calls', tonum(ARGV[1]), 1)
if refused then return refused end
return '{"ok":true}'
